"""A local fleet for the status task and the metrics file (tests/tasks/test_status_fleet.py, test_metrics_fleet.py),
brought up once for both and torn down at the end of the session, also after a failure.

- ws1 is provisioned and verified for real (`pyinfra INVENTORY deploy.py --limit ws1`: the torch 2.13.0 CPU wheel
  stands in for the ROCm wheel, in the venv the venv stage made for the session (tests/support/venv_image.py), no
  system ROCm: it FAILS verification, as the demo's hosts do), with Debian's real
  `prometheus-node-exporter` and `prometheus` (for promtool) installed from Debian's archive first, so the textfile
  directory exists when the verifier and the apt hook write into it (their daemons are never started by apt here:
  the fleet's policy-rc.d);
- ws2 keeps nothing (its verifier installed by tasks/strays.py, never verified) and has a planted venv python that
  would leave a mark if anything ran it;
- ws3 keeps hostile files where the results belong: a symlink to a root-only file, a FIFO, a file over the read
  limit (its verifier installed by tasks/strays.py, which reads them);
- ws4 is there to be made unreachable by a test (its sshd stopped, then started again);
- ws5 was never provisioned: no verifier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fleet_deploy import deploy

MARK = "/tmp/venv-code-ran"
SECRET = "root-only-5e1f0c"  # in ws3's /root/secret (0600), where its last-verify.json points


@dataclass
class KeptFleet:
    fleet: object  # localfleet.fleet.Fleet
    reports: Path
    first: object  # the deploy of ws1 (PyinfraRun)


def _plant(fleet) -> None:
    ws2 = fleet.host("ws2").root
    venv_bin = ws2 / "opt/rocm-fleet/venv/bin"
    venv_bin.mkdir(parents=True)
    (ws2 / "opt/rocm-fleet/venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    for name in ("python", "python3"):
        (venv_bin / name).write_text(f"#!/bin/sh\ntouch {MARK}\n")
        (venv_bin / name).chmod(0o755)
    ws3 = fleet.host("ws3").root / "var/lib/rocm-fleet"
    (ws3 / "apt-hook").mkdir(parents=True)
    (ws3 / "boot-check").mkdir()
    secret = fleet.host("ws3").root / "root" / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    (ws3 / "last-verify.json").symlink_to("/root/secret")
    os.mkfifo(ws3 / "apt-hook" / "last.json")
    with open(ws3 / "boot-check" / "last.json", "wb") as big:
        big.truncate(64 * 1024 * 1024)  # sparse: 64 MiB that no reader may take in


@pytest.fixture(scope="session")
def kept_fleet(tmp_path_factory, venv_image):
    if os.geteuid() != 0:
        pytest.skip("needs root: a local fleet (containers, mounts, sshd)")
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("kept-fleet-reports")
    with Fleet.up(n=5, login="admin", data={"reports_dir": str(reports)}) as fleet:
        fleet.host("ws1").apt_install(["prometheus-node-exporter", "prometheus"], recommends=False)
        _plant(fleet)
        venv_image.lend(fleet.host("ws1"))
        first = deploy(fleet.inventory, "deploy.py", limit="ws1")
        assert first.returncode == 1 and "[ws1] ws1: verification failed — linkage.static:" in first.log, (
            first.explain()
        )
        strays = deploy(fleet.inventory, "tasks/strays.py", limit="ws[23]")
        assert strays.returncode == 0 and strays.changed_operations == ["Strays | Install the verifier"], (
            strays.explain()
        )
        yield KeptFleet(fleet, reports, first)
