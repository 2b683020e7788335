"""tasks/status.py for real: the pyinfra CLI over real SSH into local Debian 12 workstations (tests/tasks/conftest.py),
logged in as an admin with sudo: what each host keeps is read in one command per host, nothing changes on any host,
hostile files are refused without being followed or opened, an unreachable host is a row, a host never provisioned
is a row that says so, and the summary is the one a verification run writes, each host "as of" its results."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.fleet_deploy import ENV, PYINFRA, REPO, snapshot, summary_finding, summary_row
from tests.tasks.conftest import MARK, SECRET

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]


def status(fleet, *extra: str) -> subprocess.CompletedProcess:
    """`pyinfra INVENTORY tasks/status.py -y --debug`: --debug prints every command pyinfra runs on each host."""
    return subprocess.run(
        [PYINFRA, str(fleet.inventory), "tasks/status.py", "-y", "--debug", *extra],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=600,
    )


def test_the_verification_keeps_its_report_on_the_host(kept_fleet):
    kept = kept_fleet.fleet.host("ws1").root / "var/lib/rocm-fleet/last-verify.json"
    on_controller = json.loads((kept_fleet.reports / "ws1.json").read_text())
    assert json.loads(kept.read_text()) == on_controller
    assert oct(kept.stat().st_mode & 0o777) == "0o644" and kept.stat().st_uid == 0


def test_status_reads_every_host_once_changes_nothing_and_writes_the_summary(kept_fleet):
    fleet = kept_fleet.fleet
    before = {name: snapshot(fleet.host(name).root) for name in ("ws1", "ws2", "ws3", "ws5")}
    fleet.host("ws4").stop_sshd()
    try:
        done = status(fleet)
    finally:
        fleet.host("ws4").start_sshd()
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-4000:]
    assert done.returncode == 1, output[-4000:]  # pyinfra's rule: a host it could not connect to fails the run
    # One command per reachable host: the fact (pyinfra's own connection, then this one round trip): the installed
    # verifier's `kept`, its launcher checked first.
    for name in ("ws1", "ws2", "ws3", "ws5"):
        commands = [line for line in output.splitlines() if f"Running command on {name}:" in line]
        assert len(commands) == 1, commands
        assert "python3 -I -S /var/lib/rocm-fleet/verifier/launcher.py kept" in commands[0] and "sudo" in commands[0]
    assert not [line for line in output.splitlines() if "Running command on ws4:" in line]
    # Nothing changed on any host: no upload, no file written, nothing of the venv run — but for the mark sudo itself
    # leaves in the admin's home on its first use there (ws2 and ws3 never saw a deploy).
    for name, paths in before.items():
        after = snapshot(fleet.host(name).root)
        if "/home/admin/.sudo_as_admin_successful" not in paths:
            after.pop("/home/admin/.sudo_as_admin_successful", None)
            after["/home/admin"] = paths["/home/admin"]
        assert after == paths, name
    assert not (fleet.host("ws2").root / MARK.lstrip("/")).exists()

    summary = (kept_fleet.reports / "status.md").read_text()
    assert summary.startswith("# rocm-fleet status\n\n5 host(s): 1 fail, 3 not verified, 1 unreachable — written ")
    verified = (kept_fleet.reports / "summary.md").read_text()  # the verification run's, for ws1
    report = json.loads((kept_fleet.reports / "ws1.json").read_text())
    ws1 = summary_row(summary, "ws1")
    assert ws1.startswith("| ws1 | **FAIL** | linkage.static +") and "| none | 2.13.0+cpu † |" in ws1
    assert ws1.split(" | ")[:-1] == summary_row(verified, "ws1").split(" | ")[:-1]  # all but "as of"
    as_of = report["generated_at"].replace("T", " ")[:16] + "Z ("
    assert ws1.split(" | ")[-1].startswith(as_of) and ws1.endswith(" ago) |")
    assert summary_finding(summary, "ws1") == summary_finding(verified, "ws1")
    assert summary_finding(summary, "ws2") == (
        "**NOT VERIFIED** no verification report kept on the host — run pyinfra INVENTORY tasks/verify.py"
    )
    ws3 = summary_finding(summary, "ws3")
    assert ws3.startswith(
        "**NOT VERIFIED** /var/lib/rocm-fleet/last-verify.json cannot be used "
        "(/var/lib/rocm-fleet/last-verify.json: a symbolic link (not followed here), not a regular "
        "file)"
    )
    also = summary.split("## Findings", 1)[1].split("## Checks", 1)[0]
    assert (
        "/var/lib/rocm-fleet/apt-hook/last.json: a FIFO (a named pipe: opening it would block), not a regular file"
    ) in also
    assert "/var/lib/rocm-fleet/boot-check/last.json: 67108864 bytes, more than the 4 MiB any real one has" in also
    assert summary_finding(summary, "ws4") == "**UNREACHABLE** could not connect"
    assert summary_finding(summary, "ws5") == (
        "**NOT VERIFIED** never provisioned: this host has no rocm-fleet verifier — run pyinfra INVENTORY deploy.py"
    )
    page = (kept_fleet.reports / "status.html").read_text()
    assert SECRET not in summary + page + output  # the symlink's target was never read
    # The verification run's own summary is left as it was.
    assert verified == (kept_fleet.reports / "summary.md").read_text()


def test_status_with_dry_still_reads_and_writes_the_summary(kept_fleet):
    (kept_fleet.reports / "status.md").unlink()
    done = status(kept_fleet.fleet, "--dry")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (kept_fleet.reports / "status.md").read_text().startswith("# rocm-fleet status\n\n5 host(s): 1 fail, ")
