"""The apt hook for real, over SSH on a local Debian 12 workstation (localfleet), logged in as an admin with sudo:

the host has the real torch 2.13.0 CPU wheel (the STAND-IN for the unreachable ROCm wheel) and bitsandbytes 0.50.1
in the venv the venv stage made for the session (tests/support/venv_image.py; tasks/venv.py runs here and finds it in
place), tasks/apt_hook.py installs the hook, then a real `apt-get install slurm-wlm-rsmi-plugin` from
Debian's archive pulls the distro librocm-smi64-1 in: the hook's warning shows in apt's output, naming the new stray
and what pulled it in; the next `tasks/verify.py` states the drift; `apt-get purge` clears it. ROCm is absent (no
repo.radeon.com here, no GPU), so every report fails on the missing system ROCm throughout: the drift is what moves.

The tests run in order on one host (each builds on the one before).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from roles.apt_hook.model import CONF_PATH, HOOK_DIR, HOOK_PREFIX, SCRIPT_PATH
from roles.verification.host_row import short_time
from roles.verifier import TOP, not_installed_line
from tests.support.debs import build_deb
from tests.support.fleet_deploy import deploy, snapshot, summary_row
from tests.support.waiting import wait_for
from verify.report.kept import parse_time

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

HOOK_OP = "Apt hook | Re-check linkage and strays after every dpkg run (dpkg post-invoke, apt DPkg::Post-Invoke)"
NEW_STRAY = (
    "worse: new stray package: librocm-smi64-1 5.2.3-2 (pulled in by slurm-wlm-rsmi-plugin, "
    "slurm-wlm-rsmi-plugin-dev; ships librocm_smi64.so.1, which a ROCm 7.2 consumer could bind to)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, venv_image):
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("reports")
    with Fleet.up(n=1, login="admin", data={"reports_dir": str(reports)}) as up:
        host = up.host("ws1")
        venv_image.lend(host)
        run = deploy(up.inventory, "tasks/venv.py")
        assert run.returncode == 0, run.explain()
        yield up, host, reports


def apt(host, *arguments: str):
    """apt-get as the admin runs it: over SSH, with sudo. Returns (exit status, the hook's lines, all output)."""
    done = host.ssh(["sudo", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", *arguments], check=False)
    output = done.stdout + done.stderr
    return done.returncode, [line for line in output.splitlines() if line.startswith(HOOK_PREFIX)], output


def verifier_version(host) -> str:
    return os.readlink(host.root / TOP.lstrip("/") / "current")


def test_hook_installed_then_nothing_to_do(fleet):
    up, host, _ = fleet
    run = deploy(up.inventory, "tasks/apt_hook.py")
    assert run.returncode == 0, run.explain()
    assert HOOK_OP in run.changed_operations, run.explain()
    assert (
        "--venv /opt/rocm-fleet/venv --expect-rocm 7.2.4 --expect-bitsandbytes 0.50.1"
        in (host.root / SCRIPT_PATH.lstrip("/")).read_text()
    )
    baseline = json.loads((host.root / HOOK_DIR.lstrip("/") / "last.json").read_text())
    assert baseline["report"]["request"]["static_only"] is True and baseline["drift"] is None

    version = verifier_version(host)
    run = deploy(up.inventory, "tasks/apt_hook.py")
    assert run.returncode == 0, run.explain()
    if verifier_version(host) == version:  # (others may edit verify/ in this working tree while the test runs)
        # results {} would mean pyinfra printed no JSON at all, not that nothing changed.
        assert run.results and run.changed_operations == [], run.explain()

    # The baseline report of the controller: the host fails (no system ROCm), as it will throughout.
    run = deploy(up.inventory, "tasks/verify.py")
    assert run.returncode == 1 and "[ws1] ws1: verification failed — linkage.static: libhipblas.so.3" in run.log, (
        run.explain()
    )


def test_apt_pulling_a_stray_in_shows_the_hooks_warning_in_apts_output(fleet):
    _, host, _ = fleet
    code, hook, output = apt(host, "update")
    assert code == 0, output[-2000:]
    code, hook, output = apt(host, "install", "slurm-wlm-rsmi-plugin")
    assert code == 0, output[-3000:]
    assert "Setting up librocm-smi64-1 (5.2.3-2)" in output
    assert hook[0] == (
        f"{HOOK_PREFIX} WARNING: this dpkg run made the ROCm setup of /opt/rocm-fleet/venv worse (check now FAIL):"
    )
    assert f"{HOOK_PREFIX}   {NEW_STRAY}" in hook
    assert hook[-1].startswith(f"{HOOK_PREFIX} now FAIL: linkage.static: libhipblas.so.3")


def test_the_next_verify_run_reports_the_drift(fleet):
    up, _, reports = fleet
    run = deploy(up.inventory, "tasks/verify.py")
    assert run.returncode == 1, run.explain()
    previous = "DRIFT worse since the previous report ("
    [line] = [line for line in run.log.splitlines() if previous in line and "librocm-smi64-1" in line]
    assert line.strip().startswith(f"[ws1] {previous}") and line.endswith(NEW_STRAY.replace("worse: ", "", 1))
    summary = (reports / "summary.md").read_text()
    assert line.strip()[len("[ws1] ") :] in summary


def test_purging_it_clears_the_warning(fleet):
    _, host, _ = fleet
    code, hook, output = apt(host, "purge", "--autoremove", "slurm-wlm-rsmi-plugin")
    assert code == 0, output[-3000:]
    [cleared] = hook
    assert cleared.startswith(f"{HOOK_PREFIX} cleared by this dpkg run: ") and cleared.endswith("(check now FAIL)")
    assert "stray package gone: librocm-smi64-1 5.2.3-2" in cleared


def test_verify_changes_nothing_on_the_host_but_the_verifier_and_its_kept_report_and_states_what_cleared(fleet):
    up, host, _ = fleet
    before, version = snapshot(host.root), verifier_version(host)
    run = deploy(up.inventory, "tasks/verify.py")
    after = snapshot(host.root)
    assert run.returncode == 1, run.explain()
    moved = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    # The report the verifier keeps for the status task is replaced (renamed into its directory); nothing else — but
    # a new version of the verifier when others changed verify/ in this working tree meanwhile.
    kept = "/var/lib/rocm-fleet/last-verify.json"
    if verifier_version(host) != version:
        moved = [path for path in moved if not path.startswith(TOP)]
    assert kept in moved and set(moved) <= {"/var/lib/rocm-fleet", kept}, moved
    assert "[ws1] DRIFT better since the previous report (" in run.log, run.explain()
    assert "stray package gone: librocm-smi64-1 5.2.3-2" in run.log, run.explain()


def status_of(up, reports) -> str:
    """`pyinfra INVENTORY tasks/status.py` as the admin runs it; the host's row and its findings (reports/status.md)."""
    run = deploy(up.inventory, "tasks/status.py")
    assert run.returncode == 0, run.explain()
    return (reports / "status.md").read_text()


def hook_time(host) -> float:
    """When the apt hook's last result was made (its checked_at), by the host's clock (this machine's)."""
    return parse_time(json.loads((host.root / HOOK_DIR.lstrip("/") / "last.json").read_text())["checked_at"])


def test_a_plain_dpkg_i_of_a_downloaded_stray_is_rechecked_and_the_status_names_it(fleet):
    """Issue 26 as a new user tried it: `apt-get download librocm-smi64-1` (Debian's ROCm 5 SMI library, from the
    archive), then `sudo dpkg -i` of it. dpkg's own post-invoke runs the check; the status names the stray and says
    nothing changed past it."""
    up, host, reports = fleet
    host.ssh(["sh", "-c", "cd && apt-get download librocm-smi64-1"])  # as the admin, in its home
    done = host.ssh(["sh", "-c", "cd && sudo dpkg -i librocm-smi64-1_*.deb"], check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    hook = [line for line in output.splitlines() if line.startswith(HOOK_PREFIX)]
    assert hook[0].startswith(f"{HOOK_PREFIX} WARNING: this dpkg run made the ROCm setup of /opt/rocm-fleet/venv worse")
    assert any("new stray package: librocm-smi64-1 5.2.3-2" in line for line in hook), hook
    status = status_of(up, reports)
    row = summary_row(status, "ws1")
    assert "librocm-smi64-1 5.2.3-2" in status and "packages changed" not in status, status
    assert row.startswith("| ws1 | **FAIL** |"), row


def test_a_dpkg_run_past_every_hook_makes_the_status_say_packages_changed_since(fleet):
    """A front end that says it holds dpkg's lock (DPKG_FRONTEND_LOCKED) and runs no apt Post-Invoke: no hook runs,
    and the status says what dpkg's log names after the newest result shown (the hook's, of the dpkg -i above)."""
    up, host, reports = fleet
    checked = hook_time(host)
    wait_for(lambda: time.time() >= checked + 1, "the second after the hook's result")  # dpkg logs whole seconds
    done = host.ssh(["sudo", "env", "DPKG_FRONTEND_LOCKED=1", "dpkg", "--purge", "librocm-smi64-1"], check=False)
    assert done.returncode == 0 and HOOK_PREFIX not in done.stdout + done.stderr, done.stdout + done.stderr
    assert hook_time(host) == checked  # nothing re-checked
    status = status_of(up, reports)
    since = short_time(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(checked)))
    assert f"packages changed since {since}: librocm-smi64-1 5.2.3-2 removed" in status, status
    assert summary_row(status, "ws1").endswith("⚠ packages changed |"), status


def test_the_next_verification_covers_them_and_a_status_file_edited_past_dpkg_is_said_too(fleet):
    up, host, reports = fleet
    run = deploy(up.inventory, "tasks/verify.py")
    assert run.returncode == 1, run.explain()
    assert "packages changed" not in status_of(up, reports)
    verified = parse_time(json.loads((host.root / "var/lib/rocm-fleet/last-verify.json").read_text())["generated_at"])
    wait_for(lambda: time.time() >= verified + 1, "the second after the verification's report")
    host.ssh(["sudo", "touch", "/var/lib/dpkg/status"])  # as an edit of the database past dpkg leaves it
    status = status_of(up, reports)
    assert "the dpkg database (/var/lib/dpkg/status) was changed at" in status, status
    assert "(its log names no package since)" in status, status


def test_the_hooks_own_failure_is_one_line_and_leaves_apts_exit_status(fleet, tmp_path):
    _, host, _ = fleet
    deb = build_deb(tmp_path, {"Package": "rocm-fleet-test-ok", "Version": "1.0", "Architecture": "all"})
    (host.root / "tmp/ok.deb").write_bytes(deb.read_bytes())
    host.ssh(["sudo", "mv", TOP, f"{TOP}.away"])
    code, hook, output = apt(host, "install", "/tmp/ok.deb")
    assert code == 0, output[-2000:]
    assert hook == [not_installed_line(HOOK_PREFIX)]


def test_apt_hook_false_removes_it(fleet):
    up, host, _ = fleet
    run = deploy(up.inventory, "tasks/apt_hook.py", "apt_hook=false")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == ["Apt hook | Remove the apt hook (apt_hook: False)"], run.explain()
    assert not (host.root / CONF_PATH.lstrip("/")).exists() and not (host.root / HOOK_DIR.lstrip("/")).exists()
    code, hook, output = apt(host, "install", "--reinstall", "/tmp/ok.deb")
    assert code == 0 and hook == [], output[-2000:]
