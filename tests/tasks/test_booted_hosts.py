"""Day 2 on a workstation that really boots: systemd as PID 1 (a booted local-fleet host, localfleet/container.py),
deployed with the real `pyinfra INVENTORY deploy.py` over SSH as an admin with sudo, then rebooted.

- The boot check: after the deploy, rocm-fleet-boot-check.service is enabled in systemd's own eyes and has not run;
  at the next boot systemd runs it, and its result is kept with that boot's id (a new one at every boot); the status
  task shows the host as of that result. A boot in which it does not run (the unit disabled) keeps the last result,
  whose boot id is then an older boot's.
- The apt hook from unattended-upgrades started by its own service (`systemctl start apt-daily-upgrade.service`, the
  unit its timer starts every morning): unattended-upgrades upgrades a package from a local apt repository inside the
  host (a newer version built with dpkg-deb, its origin the only one allowed), and the hook's result file is written
  again by that run.
- A real `prometheus-node-exporter` (Debian's) as the systemd service its package installs, started at boot, serves
  the metrics file the verification and the boot check wrote, on the host's own loopback port.

The host has no GPU and no system ROCm, and torch is the CPU stand-in (the venv the venv stage made for the session,
tests/support/venv_image.py): every check fails on linkage, by design, and each test looks at what it is about.
The tests run in order on one host.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from localfleet.ports import LOOPBACK, free_port, is_listening
from roles.apt_hook.model import STATE_FILE as HOOK_RESULT
from roles.boot_check.model import STATE_DIR, UNIT_NAME
from roles.verification.host_row import short_time
from tests.support.debs import build_deb
from tests.support.fleet_deploy import ENV, PYINFRA, REPO, deploy, summary_row
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (systemd-nspawn, mounts, sshd)"),
]

BOOT_RESULT = f"{STATE_DIR}/last.json"
KERNEL = platform.release()  # a container runs this machine's kernel
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
PACKAGE = "rocm-fleet-test-upgrade"
ORIGIN = "rocm-fleet-tests"
REPO_DIR = "/srv/rocm-fleet-test-repo"
# unattended-upgrades as a workstation runs it, allowed to upgrade from the test repository only: `#clear` drops
# Debian's own origins (50unattended-upgrades), so nothing is fetched from the archive.
UNATTENDED = f"""\
APT::Periodic::Enable "1";
APT::Periodic::Update-Package-Lists "0";
APT::Periodic::Unattended-Upgrade "1";
#clear Unattended-Upgrade::Origins-Pattern;
Unattended-Upgrade::Origins-Pattern {{ "origin={ORIGIN}"; }};
"""


@dataclass
class Booted:
    fleet: object  # localfleet.fleet.Fleet
    host: object  # its one FleetHost
    reports: Path
    deployed: object  # the deploy's PyinfraRun
    exporter_port: int


@pytest.fixture(scope="module")
def booted(tmp_path_factory, venv_image):
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("booted-reports")
    exporter_port = free_port()
    with Fleet.up(n=1, login="admin", boot=True, data={"reports_dir": str(reports)}) as fleet:
        host = fleet.host("ws1")
        # Installed as apt installs them: enabled for boot, not started (the fleet's policy-rc.d).
        host.apt_install(["unattended-upgrades", "prometheus-node-exporter"], recommends=False)
        # The host shares the controller's network: node_exporter's port 9100 on every address would be the
        # controller's. Its own loopback port instead, and the textfile collector only.
        (host.root / "etc/default/prometheus-node-exporter").write_text(
            f'ARGS="--web.listen-address={LOOPBACK}:{exporter_port} --collector.disable-defaults '
            f'--collector.textfile --collector.textfile.directory={TEXTFILE_DIR}"\n'
        )
        venv_image.lend(host)  # mounted in the root while the host runs: it appears inside (a shared mount)
        deployed = deploy(fleet.inventory, "deploy.py")
        assert deployed.returncode == 1 and "[ws1] ws1: verification failed — linkage.static:" in deployed.log, (
            deployed.explain()
        )
        yield Booted(fleet, host, reports, deployed, exporter_port)


def systemctl_show(host, unit: str, *properties: str) -> dict[str, str]:
    shown = host.run(["systemctl", "show", f"--property={','.join(properties)}", unit]).stdout
    return dict(line.split("=", 1) for line in shown.splitlines())


def boot_result(host) -> dict:
    return json.loads((host.root / BOOT_RESULT.lstrip("/")).read_text())


def test_after_the_deploy_systemd_has_the_boot_check_enabled_and_it_has_not_run(booted):
    host = booted.host
    assert host.run(["systemctl", "is-enabled", UNIT_NAME]).stdout == "enabled\n"
    shown = systemctl_show(host, UNIT_NAME, "LoadState", "ActiveState", "ExecMainStartTimestampMonotonic")
    assert shown == {"LoadState": "loaded", "ActiveState": "inactive", "ExecMainStartTimestampMonotonic": "0"}
    assert not (host.root / BOOT_RESULT.lstrip("/")).exists()  # it runs at boot, not at the deploy


def test_the_boot_check_runs_at_the_next_boot_and_keeps_its_result_with_that_boots_id(booted):
    host = booted.host
    before = host.boot_id()

    after = host.reboot()  # returns once systemd has finished the boot, the boot check's job included

    assert after != before
    shown = systemctl_show(host, UNIT_NAME, "ActiveState", "Result", "ExecMainStatus")
    # It ran, and failed as the check does here (no system ROCm): a failed unit is how a boot check says FAIL.
    assert shown == {"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "1"}, shown
    journal = host.run(["journalctl", "--boot", f"--unit={UNIT_NAME}", "--output=cat", "--no-pager"]).stdout
    assert f"rocm-fleet boot check: {KERNEL}: FAIL — linkage.static: libhipblas.so.3" in journal, journal
    kept = boot_result(host)
    assert (kept["boot_id"], kept["kernel"], kept["report"]["verdict"]) == (after, KERNEL, "fail")
    assert kept["report"]["request"]["static_only"] is False  # the full check: runtime and NF4 included


def run_status(booted) -> subprocess.CompletedProcess:
    """`pyinfra INVENTORY tasks/status.py -y`, as the admin runs it."""
    return subprocess.run(
        [PYINFRA, str(booted.fleet.inventory), "tasks/status.py", "-y"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=600,
    )


def test_the_status_shows_the_host_as_of_that_boots_check(booted):
    host = booted.host
    kept = boot_result(host)
    done = run_status(booted)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    status = (booted.reports / "status.md").read_text()
    row = summary_row(status, "ws1")
    assert row.startswith("| ws1 | **FAIL** | linkage.static") and row.split(" | ")[-1].startswith(
        short_time(kept["checked_at"])
    ), row
    # The row's details (the page's) say which kept result it rests on, and that the verification's is older.
    page = (booted.reports / "status.html").read_text()
    when = re.escape(short_time(kept["checked_at"]))
    assert re.search(rf"<li>boot check in {re.escape(KERNEL)}: FAIL as of {when} \([^)<]*\) — shown</li>", page), page
    assert re.search(r"<li>verification: FAIL as of [^<]* — older than what is shown: not counted</li>", page), page
    # Nothing it cannot see: the result is this boot's, and no package changed after it.
    assert "⚠" not in row.split(" | ")[-1] and "earlier boot" not in status and "packages changed" not in status, row


def test_a_real_node_exporter_service_started_at_boot_serves_the_metrics_file(booted):
    host = booted.host
    assert host.run(["systemctl", "is-active", "prometheus-node-exporter.service"]).stdout == "active\n"
    wait_for(lambda: is_listening(booted.exporter_port), "node_exporter to listen on its port")
    scraped = requests.get(f"http://{LOOPBACK}:{booted.exporter_port}/metrics", timeout=60).text.splitlines()
    assert 'rocm_fleet_passed{source="boot_check"} 0' in scraped
    assert 'rocm_fleet_verdict{source="boot_check",verdict="fail"} 1' in scraped
    assert 'rocm_fleet_passed{source="verification"} 0' in scraped
    assert "node_textfile_scrape_error 0" in scraped  # node_exporter read the file without complaint


def test_a_boot_without_the_check_keeps_the_last_result_with_an_older_boots_id(booted):
    """What a status can tell an unchecked boot by (issue 26): the kept result's boot id is not the running boot's."""
    host = booted.host
    checked = boot_result(host)
    host.run(["systemctl", "disable", UNIT_NAME])

    unchecked = host.reboot()

    assert unchecked != checked["boot_id"]
    assert boot_result(host) == checked  # nothing ran, nothing was written
    assert systemctl_show(host, UNIT_NAME, "ExecMainStartTimestampMonotonic") == {
        "ExecMainStartTimestampMonotonic": "0"
    }
    # The status says so (issue 27 item 3): the row rests on that older boot's result, and says it is one.
    done = run_status(booted)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    status_md = (booted.reports / "status.md").read_text()
    row = summary_row(status_md, "ws1")
    assert row.startswith("| ws1 | **FAIL** | linkage.static") and row.endswith("⚠ earlier boot |"), row
    when = short_time(checked["checked_at"])
    assert (
        f"the boot check's result ({when} (" in status_md
        and "is from an earlier boot than the running one: the boot check never ran in this boot, was killed, or "
        "failed before writing"
        in status_md
    ), status_md
    # The stage finds the unit disabled and enables it again, for the boots to come.
    run = deploy(booted.fleet.inventory, "tasks/boot_check.py")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == ["Boot check | Re-verify once per boot (rocm-fleet-boot-check.service)"], (
        run.explain()
    )
    assert host.run(["systemctl", "is-enabled", UNIT_NAME]).stdout == "enabled\n"


def _test_package(tmp_path: Path, version: str) -> Path:
    return build_deb(
        tmp_path,
        {"Package": PACKAGE, "Version": version, "Description": "rocm-fleet test: a package to upgrade (tests only)"},
        {f"/usr/share/{PACKAGE}/version": f"{version}\n".encode()},
    )


def _flat_repository(directory: Path, deb: Path) -> None:
    """A flat apt repository holding `deb`, its Release naming ORIGIN (what unattended-upgrades' pattern matches)."""
    directory.mkdir(parents=True)
    (directory / deb.name).write_bytes(deb.read_bytes())
    packages = subprocess.run(["dpkg-scanpackages", "."], cwd=directory, capture_output=True, text=True, check=True)
    (directory / "Packages").write_text(packages.stdout)
    data = packages.stdout.encode()
    (directory / "Release").write_text(
        f"Origin: {ORIGIN}\nLabel: {ORIGIN}\nSuite: stable\nCodename: tests\nArchitectures: amd64\n"
        f"SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data)} Packages\n"
    )


def test_unattended_upgrades_started_by_its_service_runs_dpkg_and_the_apt_hook_writes_its_result_again(
    booted, tmp_path
):
    host = booted.host
    old, new = _test_package(tmp_path, "1.0"), _test_package(tmp_path, "2.0")
    (host.root / "tmp" / old.name).write_bytes(old.read_bytes())
    host.run(["dpkg", "--install", f"/tmp/{old.name}"])
    _flat_repository(host.root / REPO_DIR.lstrip("/"), new)
    (host.root / "etc/apt/sources.list.d/rocm-fleet-tests.list").write_text(f"deb [trusted=yes] file:{REPO_DIR} ./\n")
    (host.root / "etc/apt/apt.conf.d/52rocm-fleet-tests-unattended").write_text(UNATTENDED)
    # The lists of the test repository only (apt-daily.service would fetch Debian's too).
    host.run(
        [
            "apt-get",
            "update",
            "-q",
            "-o",
            "Dir::Etc::sourcelist=sources.list.d/rocm-fleet-tests.list",
            "-o",
            "Dir::Etc::sourceparts=-",
            "-o",
            "APT::Get::List-Cleanup=0",
        ]
    )
    hook_result = host.root / HOOK_RESULT.lstrip("/")
    before = json.loads(hook_result.read_text())["checked_at"] if hook_result.exists() else None
    started = time.time()

    # What apt-daily-upgrade.timer starts each morning; systemctl start returns when the oneshot has finished.
    host.run(["systemctl", "start", "apt-daily-upgrade.service"])

    assert systemctl_show(host, "apt-daily-upgrade.service", "Result") == {"Result": "success"}
    installed = host.run(["dpkg-query", "-W", "-f", "${Version}", PACKAGE]).stdout
    log = host.run(["cat", "/var/log/unattended-upgrades/unattended-upgrades.log"], check=False).stdout
    assert installed == "2.0", log[-3000:]
    assert f"Packages that will be upgraded: {PACKAGE}" in log, log[-3000:]
    # The hook ran after unattended-upgrades' dpkg run: its result is a new one, written since the service started.
    hook = json.loads(hook_result.read_text())
    assert hook["kind"] == "rocm-fleet.apt-hook-result" and hook["checked_at"] != before, hook["checked_at"]
    assert hook_result.stat().st_mtime >= started - 1  # (the host's clock is this machine's)
    assert hook["report"]["verdict"] == "fail"  # the static checks, failing on linkage as every check here
