"""The end-to-end suite's one shared fleet: three local Debian 12 workstations (localfleet) reached over real SSH,
logged in as an admin account with sudo as real fleets are, each prepared for one case before the first real
`pyinfra INVENTORY deploy.py -y`:

    ws1  strays    slurm-wlm-rsmi-plugin and librocsparse0 installed from Debian's archive first, so the distro
                   librocm-smi64-1, libamdhip64-5, libhsa-runtime64-1 … arrive through their apt dependencies
    ws2  plain     nothing added: no system ROCm
    ws3  stand-in  a STAND-IN ROCm 7.2.4 tree under /opt/rocm-7.2.4 (tests/support/standin_rocm_tree.py)

Each host borrows the venv the real venv stage made once for the session (tests/support/venv_image.py: torch 2.13.0
CPU and bitsandbytes 0.50.1, mounted as an overlay, so each host's changes stay its own): the venv stage of these
deploys finds it in place, and the run spends its time on what these tests look at. A fresh three-host deploy, venvs
installed, is bin/demo's test (test_demo.py).

The fleet and the first deploy (its exit code, log, reports and summary, kept as they were: later runs overwrite the
files) are made once for this package (tests/e2e/). A test that changes a host (stops its sshd, holds its dpkg lock,
removes a package) puts it back. When the package's last test is done the fleet is torn down — not at the end of the
whole session, so three hosts do not sit on the disk while the rest of the suite runs — and the teardown is checked
from the kernel's view: no mount, no process, no listening port left.

What cannot be real here: AMD's side (no repo.radeon.com: `rocm_install: skip`; no GPU: NF4 runs on the CPU) and the
torch ROCm wheel (torch 2.13.0 CPU stands in for it, named so in the inventory and in the summary).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.chroot_hosts import PyinfraRun
from tests.support.fleet_checks import leftovers
from tests.support.fleet_deploy import deploy, read_reports
from tests.support.standin_rocm_tree import install_standin_rocm

STRAYS, PLAIN, STANDIN = "ws1", "ws2", "ws3"
HOSTS = (STRAYS, PLAIN, STANDIN)
# Installed on the strays host before the deploy; what they pull in through Depends is what real fleets get.
STRAY_PULLERS = ("slurm-wlm-rsmi-plugin", "librocsparse0")


@dataclass(frozen=True)
class DeployedFleet:
    fleet: object  # localfleet.Fleet
    reports_dir: Path  # reports_dir of every run on this fleet (inventory data)
    first: PyinfraRun  # the first deploy
    first_reports: dict  # host -> its report from the first deploy
    first_summary: str  # reports/summary.md after the first deploy

    def host(self, name: str):
        return self.fleet.host(name)


@pytest.fixture(scope="package")
def deployed(tmp_path_factory, venv_image) -> Iterator[DeployedFleet]:
    if os.geteuid() != 0:
        pytest.skip("needs root: a local fleet (containers, mounts, sshd)")
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("e2e-reports")
    with Fleet.up(n=len(HOSTS), login="admin", data={"reports_dir": str(reports)}) as fleet:
        directory, ports = fleet.directory, [host.port for host in fleet.hosts]
        # Depends alone bring the stray chain; Recommends would add ~40 unrelated packages and a minute.
        fleet.host(STRAYS).apt_install(STRAY_PULLERS, recommends=False)
        install_standin_rocm(fleet.host(STANDIN).root)
        for host in fleet.hosts:
            venv_image.lend(host)
        first = deploy(fleet.inventory)
        summary = (reports / "summary.md").read_text(encoding="utf-8") if (reports / "summary.md").is_file() else ""
        yield DeployedFleet(fleet, reports, first, read_reports(reports, HOSTS), summary)
    assert leftovers(directory, ports) == [], "the fleet's teardown left these behind"
