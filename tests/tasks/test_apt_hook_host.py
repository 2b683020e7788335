"""The apt hook's files and the verifier they run on one real local-fleet host (Debian 12 over SSH, logged in as an
admin with sudo), as runs leave them: bad inventory data stops before the host is touched; a damaged verifier is found
by its content and installed again; two runs at once wait for each other on the host lock and leave every file
intact.

The host has no venv (the hook's own check then says so in one line); what matters here is the hook's files.
The tests run in order on one host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from roles.apt_hook.model import CONF_PARTIAL_PREFIX, CONF_PATH, LOCK_WHAT
from roles.host_lock import LOCK_DIR, LOCK_FILE, lock_held_message, under_host_lock
from roles.verifier import LAUNCHER, TOP
from roles.verifier import LOCK_WHAT as INSTALL_WHAT
from tests.support.chroot_hosts import finished
from tests.support.fleet_checks import rooted_processes
from tests.support.fleet_deploy import ENV, REPO, deploy, deploy_argv, host_lines, snapshot, start_deploy

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

HOOK_OP = "Apt hook | Re-check linkage and strays after every dpkg run (dpkg post-invoke, apt DPkg::Post-Invoke)"
INSTALL = "Apt hook | Install the verifier"


@pytest.fixture(scope="module")
def fleet():
    from localfleet.fleet import Fleet

    with Fleet.up(n=1, login="admin") as up:
        yield up, up.host("ws1")


def version(host) -> str:
    return os.readlink(host.root / TOP.lstrip("/") / "current")


def check(host) -> str:
    """The launcher's own check of the current version, run in the host: "intact", or why not."""
    done = host.run(["python3", "-I", "-S", LAUNCHER, "--check", f"{TOP}/{version(host)}", version(host)], check=False)
    return (done.stdout + done.stderr).strip()


def leftovers(host) -> list[str]:
    """Private work files of the hook's and the install's commands still on the host (a finished run leaves none)."""
    found = host.run(["sh", "-c", f"ls -d {TOP}/.[a-z]* {CONF_PARTIAL_PREFIX}* 2>/dev/null || true"]).stdout
    return found.split()


def test_bad_inventory_data_stops_the_run_before_anything_runs_on_the_host(fleet):
    """A path outside the inventory's character policy, given on the command line: the whole run stops with one line
    before pyinfra sends a single command (-vv would echo each as `>>>`), and the host's filesystem is as it was."""
    up, host = fleet
    before = snapshot(host.root)
    done = subprocess.run(
        deploy_argv(up.inventory, "deploy.py", "venv_path=/opt/a b") + ["-vv"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    [error] = [line for line in output.splitlines() if "pyinfra error" in line]
    assert error.endswith(
        "inventory data of host ws1, key venv_path (--data): got '/opt/a b', which has a space at "
        "character 7: a path may hold only ASCII letters, digits and _ @ % + = : , . / - — use a "
        "directory whose path has only those, e.g. '/opt/rocm-fleet/venv'"
    ), output
    assert ">>>" not in output, output
    assert snapshot(host.root) == before


def test_a_damaged_verifier_is_found_by_its_content_and_installed_again(fleet):
    up, host = fleet
    run = deploy(up.inventory, "tasks/apt_hook.py")
    assert run.returncode == 0 and HOOK_OP in run.changed_operations, run.explain()
    assert check(host) == "intact"
    copy = host.root / TOP.lstrip("/") / version(host)
    pyc = next((copy / "verify/checks/__pycache__").glob("host.cpython-*.pyc"))
    damages = {
        "a source changed": lambda: (copy / "verify/checks/host.py").write_text("raise SystemExit('tampered')\n"),
        "a compiled module truncated": lambda: pyc.write_bytes(pyc.read_bytes()[:16]),
        "a module gone": lambda: (copy / "verify/report/drift.py").unlink(),
        "a module added": lambda: (copy / "verify/commands/extra.py").write_text("print('not ours')\n"),
    }
    for what, damage in damages.items():
        damage()
        problem = check(host)
        assert problem != "intact", what
        run = deploy(up.inventory, "tasks/apt_hook.py")
        assert run.returncode == 0, f"{what}: {run.explain()}"
        # Installed again, and the hook's baseline recorded again with it.
        assert run.changed_operations == [INSTALL, HOOK_OP], f"{what}: {run.explain()}"
        said = f"verifier {version(host)[:12]} on the host: {problem}: installing it again"
        assert said in host_lines(run.log, "ws1"), f"{what}: {run.explain()}"
        assert check(host) == "intact", what
        assert leftovers(host) == [], what
    run = deploy(up.inventory, "tasks/apt_hook.py")
    assert run.returncode == 0 and run.results and run.changed_operations == [], run.explain()


class HostLockHolder:
    """The host lock held inside the host by the product's own wrapper (as a run holding it would), around a command
    that says "held" and waits until the test lets go."""

    def __init__(self, host):
        command = under_host_lock("echo held; cat > /dev/null", 600, LOCK_WHAT)
        self.process = subprocess.Popen(
            host.command(["sh", "-c", command]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        line = self.process.stdout.readline()
        assert line == "held\n", (line, self.process.stderr.read())

    def release(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.release()


def waiting_for_the_lock(host) -> int:
    """How many flock processes in the host are asleep, waiting for the host lock."""
    count = 0
    for process in rooted_processes(host.root):
        if process.name != "flock":
            continue
        try:
            state = open(f"/proc/{process.pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        count += state == "S"
    return count


def make_both_runs_change_everything(host) -> None:
    """Both runs must then install the verifier and replace the configuration, and record the baseline."""
    host.run(["sh", "-c", f"rm -rf {TOP}/{version(host)} && echo '// changed by hand' >> {CONF_PATH}"])


def finish(processes) -> list:
    runs = []
    for process in processes:
        out, err = process.communicate()
        runs.append(finished(subprocess.CompletedProcess(process.args, process.returncode, out, err)))
    return runs


def assert_intact(host, runs, expected_config: str) -> None:
    for run in runs:
        assert run.returncode == 0, run.explain()
    assert check(host) == "intact"
    assert (host.root / CONF_PATH.lstrip("/")).read_text() == expected_config
    assert leftovers(host) == []


@pytest.mark.parametrize("round_", [1, 2, 3])
def test_two_runs_at_once_wait_for_each_other_and_leave_every_file_intact(fleet, round_):
    """Both runs are started while the host lock is held, and let go only once both wait for it: both then reach
    the same files at the same moment. Without the lock, two installs would move the same version and switch the
    same `current`, and two hook commands write the same partial apt configuration."""
    up, host = fleet
    expected_config = (host.root / CONF_PATH.lstrip("/")).read_text()
    make_both_runs_change_everything(host)
    holder = HostLockHolder(host)
    try:
        runs = [start_deploy(up.inventory, "tasks/apt_hook.py") for _ in range(2)]
        waited = False
        while all(run.poll() is None for run in runs):  # until both wait on the lock, or a run ended without waiting
            if waiting_for_the_lock(host) == 2:
                waited = True
                break
            time.sleep(0.05)  # how often to look, not how long to wait
        holder.release()
    finally:
        holder.kill()
    done = finish(runs)
    assert_intact(host, done, expected_config)
    assert waited, "a run ended without waiting for the host lock:\n" + "\n".join(run.explain() for run in done)
    for run in done:
        assert run.changed_operations == [INSTALL, HOOK_OP], run.explain()


def test_two_runs_started_together_without_help_end_correctly(fleet):
    up, host = fleet
    expected_config = (host.root / CONF_PATH.lstrip("/")).read_text()
    for _ in range(2):
        make_both_runs_change_everything(host)
        assert_intact(
            host, finish([start_deploy(up.inventory, "tasks/apt_hook.py") for _ in range(2)]), expected_config
        )


def test_a_run_that_waits_longer_than_dpkg_lock_timeout_fails_with_one_line_naming_the_holder(fleet):
    up, host = fleet
    make_both_runs_change_everything(host)
    holder = HostLockHolder(host)
    try:
        record = host.run(["cat", LOCK_FILE]).stdout.strip()  # the host's own /run (a booted host's is its tmpfs)
        run = deploy(up.inventory, "tasks/apt_hook.py", "dpkg_lock_timeout=1")
    finally:
        holder.kill()
    assert run.returncode == 1, run.explain()
    assert record.startswith("changing the apt hook for root since ") and record.endswith(")"), record
    # The install is the first command under the lock: it names what it would change.
    assert f"{lock_held_message(1, INSTALL_WHAT)} {record}" in host_lines(run.log, "ws1"), run.explain()
    assert not (host.root / TOP.lstrip("/") / version(host)).exists()  # nothing was changed while another held it
    run = deploy(up.inventory, "tasks/apt_hook.py")  # and once it is let go, the next run does it all
    assert run.returncode == 0 and run.changed_operations == [INSTALL, HOOK_OP], run.explain()
    assert check(host) == "intact" and leftovers(host) == []


def test_the_host_lock_is_roots_alone_so_no_other_account_can_hold_it(fleet):
    """Issue 26, item 6: were the lock file open to other accounts, any of them could flock() it through a read-only
    descriptor and make every run wait dpkg_lock_timeout and skip its changes. After a real run, `nobody` in the host
    cannot even open it."""
    up, host = fleet
    run = deploy(up.inventory, "tasks/apt_hook.py")
    assert run.returncode == 0, run.explain()
    # Read in the host: its /run is its own (a booted host's is a tmpfs the controller does not see in its root).
    assert host.run(["stat", "-c", "%a %U", LOCK_DIR, LOCK_FILE]).stdout.splitlines() == ["700 root", "600 root"]
    done = host.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "flock", "-n", LOCK_FILE, "true"],
        check=False,
    )
    assert done.returncode != 0 and "Permission denied" in done.stderr, (done.returncode, done.stderr)
