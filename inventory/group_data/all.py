"""Data for every host of the inventories in this directory.

Real fleets log in as an admin account and use sudo (the `_sudo` global argument); the people who use a workstation
(workstation_users, venv_owner) are other accounts. Everything not set here comes from roles/pins.py.
"""

ssh_user = "fleetadmin"
_sudo = True

# Wait up to ten minutes for unattended-upgrades before failing a host.
dpkg_lock_timeout = 600
