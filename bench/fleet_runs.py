"""What the fleet benchmarks share (bench/fleet_scale.py, bench/wheelhouse_distribution.py): how they start pyinfra,
an inventory of a local fleet's first N hosts, and the machine's load average — the machine is shared, so every
measured run says what else was running (read ratios against a peer measured in the same round, not absolutes)."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from localfleet.inventory import GROUP, render_inventory

REPO = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
# A clean environment: the admin's PYTHON*/PIP* variables change no measured run; no progress spinner to draw.
ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root", "LANG": "C.UTF-8", "PYINFRA_PROGRESS": "off"}


def sub_inventory(fleet, n: int, directory: Path, skip_first: int = 0, **data) -> Path:
    """An inventory of the fleet's first n hosts (less the first `skip_first`): the fleet's own group data, with
    `data` on top."""
    hosts, group = runpy.run_path(str(fleet.inventory))[GROUP]
    path = directory / (f"inventory_{n}.py" if not skip_first else f"inventory_{skip_first + 1}-{n}.py")
    path.write_text(
        render_inventory(f"{fleet.name}-{skip_first + 1}-{n}", list(hosts[skip_first:n]), {**group, **data})
    )
    return path


def load() -> str:
    """The 1-minute load average, as `uptime` shows it."""
    return f"{os.getloadavg()[0]:.2f}"


def loads() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())
