"""roles/host_lock.py: the wrapper run for real by sh with util-linux's flock. The lock file's path is swapped for
one in the test's own directory (the text is otherwise the wrapper's exact output), so this machine's /run is never
touched. Two real runs on one fleet host are in tests/tasks/test_apt_hook_host.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from roles.host_lock import LOCK_DIR, LOCK_FILE, lock_held_message, under_host_lock


def _command(tmp_path: Path, command: str, timeout: int) -> list[str]:
    text = under_host_lock(command, timeout, "the test files")
    assert text.count(LOCK_DIR) == text.count(LOCK_FILE) + 2  # the directory made private, then only the file
    return ["sh", "-c", text.replace(LOCK_DIR, str(tmp_path / "run"))]


def _holder(tmp_path: Path) -> subprocess.Popen:
    """A real holder: the wrapper around a command that says "held" and then waits until its stdin closes."""
    holder = subprocess.Popen(
        _command(tmp_path, "echo held; cat > /dev/null", 600),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert holder.stdout.readline() == "held\n"  # it holds the lock now
    return holder


def _release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    assert holder.wait() == 0
    holder.stdout.close()


def _waiting_in_flock(session: int) -> bool:
    """A flock process of that session is asleep in the kernel, waiting for the lock."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(pid)) != session or Path(f"/proc/{pid}/comm").read_text().strip() != "flock":
                continue
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S"
        except (OSError, ProcessLookupError):
            continue
    return False


def test_the_command_runs_with_its_exit_status_and_the_holder_is_recorded(tmp_path):
    done = subprocess.run(_command(tmp_path, "echo ran; exit 3", 5), capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "ran\n", "")
    record = (tmp_path / "run" / "lock").read_text()
    user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    assert re.fullmatch(
        rf"changing the test files for {user} since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(pid \d+\)\n", record
    ), record


def test_a_second_command_waits_for_the_holder_and_then_runs(tmp_path):
    holder = _holder(tmp_path)
    waiter = subprocess.Popen(
        _command(tmp_path, f"echo second >> {tmp_path / 'order'}", 600),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        while not _waiting_in_flock(waiter.pid):  # a condition, not a time: it is blocked on the lock
            assert waiter.poll() is None, waiter.communicate()
            time.sleep(0.01)  # how often to look, not how long to wait
        assert not (tmp_path / "order").exists()
        _release(holder)
        out, err = waiter.communicate()
    finally:
        for process in (holder, waiter):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    assert (waiter.returncode, err) == (0, "")
    assert (tmp_path / "order").read_text() == "second\n"


def test_a_holder_that_stays_too_long_fails_the_second_with_one_line_naming_it(tmp_path):
    holder = _holder(tmp_path)
    try:
        record = (tmp_path / "run" / "lock").read_text().strip()
        done = subprocess.run(_command(tmp_path, f"touch {tmp_path / 'ran'}", 1), capture_output=True, text=True)
    finally:
        _release(holder)
    assert done.returncode == 1 and done.stdout == ""
    message = lock_held_message(1, "the test files").replace(LOCK_FILE, str(tmp_path / "run" / "lock"))
    assert done.stderr == f"{message} {record}\n"
    assert record.startswith("changing the test files for ")
    assert not (tmp_path / "ran").exists()


def test_the_lock_is_roots_alone_even_where_an_older_run_left_it_open_to_all(tmp_path):
    """flock() needs only a descriptor, a read-only one will do: a lock file other accounts can open is one they can
    hold. The wrapper makes the directory 0700 and the file 0600, also when they exist with wider modes."""
    (tmp_path / "run").mkdir(mode=0o755)
    (tmp_path / "run" / "lock").write_text("")
    os.chmod(tmp_path / "run", 0o755)
    os.chmod(tmp_path / "run" / "lock", 0o644)
    done = subprocess.run(_command(tmp_path, "umask", 5), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{os.umask(0o022):04o}"  # the command keeps the caller's umask
    assert oct((tmp_path / "run").stat().st_mode & 0o7777) == oct(0o700)
    assert oct((tmp_path / "run" / "lock").stat().st_mode & 0o7777) == oct(0o600)
