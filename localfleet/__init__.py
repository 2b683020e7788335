"""localfleet: N local Debian 12 test workstations (containers that boot systemd as PID 1, or with --chroot plain
chroots, each with sshd on a loopback port) for real pyinfra runs.

    python -m localfleet up --hosts 3 [--chroot]    # prints the inventory path
    python -m localfleet reboot --name N ws1        # a booted host; prints its new boot id
    python -m localfleet status
    python -m localfleet down

From Python (tests): `with Fleet.up(n=3) as fleet: …`, `Fleet.up(n=1, boot=False)` (chroots) — see
localfleet/fleet.py.
"""

from .errors import FleetError
from .fleet import Fleet, FleetInUse, down, list_fleets, sweep_abandoned
from .host import DpkgLockHolder, FleetHost

__all__ = ["DpkgLockHolder", "Fleet", "FleetError", "FleetInUse", "FleetHost", "down", "list_fleets", "sweep_abandoned"]
