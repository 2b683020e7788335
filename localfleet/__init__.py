"""localfleet: N local Debian 12 test workstations (chroots with sshd on loopback ports) for real pyinfra runs.

    python -m localfleet up --hosts 3      # prints the inventory path
    python -m localfleet status
    python -m localfleet down

From Python (tests): `with Fleet.up(n=3) as fleet: …` — see localfleet/fleet.py.
"""

from .errors import FleetError
from .fleet import Fleet, FleetInUse, down, list_fleets, sweep_abandoned
from .host import DpkgLockHolder, FleetHost

__all__ = ["DpkgLockHolder", "Fleet", "FleetError", "FleetInUse", "FleetHost", "down", "list_fleets", "sweep_abandoned"]
