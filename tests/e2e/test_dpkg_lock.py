"""The dpkg lock held on one host during the whole deploy (conftest.py's shared fleet), as a running apt or
unattended-upgrades holds it: the deploy waits up to `dpkg_lock_timeout`, then fails that host with one line that
says so while the other hosts go on — or, when the lock is let go in time, goes on.

For the deploy to need the lock at all, the host lacks python3-venv (the venv stage then installs it with apt);
the module puts it back at the end. The lock is taken inside the host the way apt takes it (localfleet's
hold_dpkg_lock: fcntl locks on /var/lib/dpkg/lock-frontend and /var/lib/dpkg/lock).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from roles.debian.apt_commands import lock_expired_message
from tests.e2e.conftest import PLAIN, STANDIN, STRAYS
from tests.support.fleet_checks import kernel_stack, rooted_processes
from tests.support.fleet_deploy import deploy, finished, host_lines, start_deploy, summary_finding, summary_row
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

LOCKED, OTHERS = PLAIN, (STRAYS, STANDIN)
VENV_PACKAGE = ("python3-venv", "python3.11-venv")


def installed(host, package: str) -> bool:
    done = host.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", package], check=False)
    return done.stdout.startswith("ii")


@pytest.fixture(scope="module")
def locked_host(deployed):
    host = deployed.host(LOCKED)
    host.run(["apt-get", "purge", "-y", "-q", *VENV_PACKAGE])
    assert not installed(host, "python3-venv")
    yield host
    if not installed(host, "python3-venv"):  # a test below failed before the deploy put it back
        host.apt_install(["python3-venv"])


def test_a_lock_held_past_the_timeout_fails_that_host_with_one_line_and_the_others_go_on(deployed, locked_host):
    with locked_host.hold_dpkg_lock():  # until the deploy is done, however long that takes
        run = deploy(deployed.fleet.inventory, "deploy.py", "dpkg_lock_timeout=5")
    assert run.returncode == 1, run.explain()
    lines = host_lines(run.log, LOCKED)
    assert lock_expired_message(5) in lines, run.log[-4000:]
    # apt's own words, naming the file (its last error line: the only one it prints for sure after a wait)
    assert "Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)" in run.log
    assert not installed(locked_host, "python3-venv")  # apt changed nothing
    # The locked host stopped there: it never reached verification …
    assert not any("verification" in line for line in lines), lines
    summary = (deployed.reports_dir / "summary.md").read_text(encoding="utf-8")
    assert summary_row(summary, LOCKED).startswith(f"| {LOCKED} | **NOT VERIFIED** | — |")
    assert summary_finding(summary, LOCKED).startswith("**NOT VERIFIED** failed at ")
    assert "python3-venv" in summary_finding(summary, LOCKED)
    # … while the others went on to the end.
    for name in OTHERS:
        assert any(line.startswith(f"{name}: verification failed — ") for line in host_lines(run.log, name))


def _waiting_apt(host, deploy_run: subprocess.Popen) -> int | None:
    """The pid of the deploy's `apt-get … install python3-venv` inside `host` once it waits for the lock — asleep in
    the kernel's nanosleep: apt takes the dpkg locks before it does anything else, and while they are held it only
    sleeps between its attempts (apt-get sleeps nowhere else). None if the deploy ends without one.
    Not apt's "Waiting for cache lock" lines: apt may not print them (see roles/debian/apt_commands.py); and not a
    number of seconds that apt has been running: on a loaded machine it may still be starting after them."""

    def waiting_or_ended() -> int | str | None:
        for process in rooted_processes(host.root):
            argv = process.argv
            if argv and argv[0].endswith("apt-get") and "install" in argv and "python3-venv" in argv:
                if "nanosleep" in kernel_stack(process.pid):
                    return process.pid
        return "ended" if deploy_run.poll() is not None else None

    found = wait_for(
        waiting_or_ended, "the deploy's apt to wait for the lock, or the deploy to end", poll_s=0.2, hang_guard_s=None
    )  # the deploy ends by itself; pytest-timeout is the hang guard
    return found if isinstance(found, int) else None


def test_a_lock_let_go_within_the_timeout_is_waited_for_and_the_deploy_goes_on(deployed, locked_host):
    holder = locked_host.hold_dpkg_lock()
    process = start_deploy(deployed.fleet.inventory, "deploy.py", "dpkg_lock_timeout=240")
    try:
        waiting = _waiting_apt(locked_host, process)
        still_held = holder.holding()
    finally:
        holder.release()  # apt is waiting on it now: let go, and the deploy must go on
    try:
        stdout, stderr = process.communicate()
    except BaseException:  # (pytest-timeout, Ctrl-C): no deploy may outlive the test
        process.kill()
        process.communicate()
        raise
    run = finished(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    assert waiting, run.explain()  # the deploy's apt was there, waiting …
    assert still_held  # … on our holder, not on nothing

    assert installed(locked_host, "python3-venv"), run.log[-4000:]
    lines = host_lines(run.log, LOCKED)
    assert not any(lock_expired_message(240) in line for line in lines)
    # It went on through the remaining stages to verification, which fails it for the usual reason only.
    assert any(
        line.startswith(f"{LOCKED}: verification failed — linkage.static: libhipblas.so.3 ") for line in lines
    ), run.log[-4000:]
