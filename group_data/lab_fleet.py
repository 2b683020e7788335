"""Data for every host of the lab_fleet group (inventories/example.py, which the top-level `inventory` points at).

Real fleets log in as an admin account and use sudo (the `_sudo` global argument); the people who use a workstation
(workstation_users, venv_owner) are other accounts. Everything not set here comes from roles/pins.py.

Not group_data/all.py: pyinfra loads this directory for every inventory run from the checkout, the local test fleets'
and the tests' own too, and an all.py would give them this fleet's login.
"""

ssh_user = "fleetadmin"
_sudo = True

# Wait up to ten minutes for unattended-upgrades before failing a host.
dpkg_lock_timeout = 600
