"""Find and stop the processes that run inside a directory tree used as a root (chroot), by their /proc/PID/root.

A process counts as "inside" when its root directory is the tree or below it; that covers sshd, every session it
forks, and anything a test starts in a host (dpkg-lock holders, apt), whoever started it and whether or not the
controller that started it is still alive.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import FleetError
from .interrupts import signals_held

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessId:
    """A pid plus its start time (clock ticks after boot), so a recycled pid is never mistaken for the original."""

    pid: int
    start: int

    def alive(self) -> bool:
        return start_time(self.pid) == self.start

    def to_json(self) -> dict:
        return {"pid": self.pid, "start": self.start}

    @classmethod
    def from_json(cls, data: dict | None) -> ProcessId | None:
        return cls(int(data["pid"]), int(data["start"])) if data else None

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        start = start_time(pid)
        return cls(pid, start) if start is not None else None


def start_time(pid: int) -> int | None:
    """Start time of a running (not zombie) process, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # a zombie holds no mounts and no ports; only its parent can reap it
        return None
    return int(fields[19])


def _root_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/root")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def processes_rooted_under(directory: Path) -> list[int]:
    top = os.path.realpath(directory).rstrip("/")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        root = _root_of(int(entry.name))
        if root is None:
            continue
        root = root.removesuffix(" (deleted)")
        if root == top or root.startswith(top + "/"):
            found.append(int(entry.name))
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap_if_child(pid: int) -> None:
    # Our own children (sshd started by this controller) become zombies until waited for.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# A hang guard, not a budget: a SIGKILLed process is gone as soon as its current system call returns, however loaded
# the machine; only one stuck in the kernel (a hung disk or NFS server) can take this long.
KILL_CAP_S = 600.0


def stop_processes(pids: list[int], grace_s: float = 3.0) -> list[int]:
    """SIGTERM; what has not exited after grace_s gets SIGKILL, and is waited for until it is gone.

    grace_s is only how long a process may take to exit on its own before it is killed (on a loaded machine it may
    be killed rather than exit): the call returns when every process has gone either way. Returns the pids still
    running at the end: none, unless one is stuck in the kernel (KILL_CAP_S).
    """
    if not pids:
        return []
    started = {pid: start_time(pid) for pid in pids}
    for pid in pids:
        _signal(pid, signal.SIGTERM)

    def remaining() -> list[int]:
        for pid in pids:
            _reap_if_child(pid)
        return [pid for pid in pids if started[pid] is not None and start_time(pid) == started[pid]]

    deadline = time.monotonic() + grace_s
    while remaining() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = remaining()
    if left:
        log.info("SIGKILL for %s (still running %.0f s after SIGTERM)", left, grace_s)
        for pid in left:
            _signal(pid, signal.SIGKILL)
        give_up = time.monotonic() + KILL_CAP_S
        while remaining() and time.monotonic() < give_up:
            time.sleep(0.05)
    return remaining()


def stop_processes_rooted_under(directory: Path, grace_s: float = 3.0) -> list[int]:
    """Stop every process whose root is inside `directory`; repeats the scan, since a dying sshd may still fork.
    Raises FleetError for a process still there KILL_CAP_S after SIGKILL (stuck in the kernel: waiting again, as
    the callers' retries would, cannot help)."""
    for _ in range(5):
        pids = processes_rooted_under(directory)
        if not pids:
            return []
        log.debug("stopping %d process(es) rooted under %s: %s", len(pids), directory, pids)
        stuck = stop_processes(pids, grace_s)
        if stuck:
            raise FleetError(
                f"processes {stuck} rooted in {directory} are still there {KILL_CAP_S:.0f} s after SIGKILL "
                f"(stuck in the kernel: a hung disk or NFS server?) — see `ps -o pid,stat,wchan:30,cmd -p "
                f"{','.join(map(str, stuck))}`, then run `python -m localfleet down` again"
            )
    return processes_rooted_under(directory)


def stop_started(process) -> None:
    """Stop a child this process started and reap it, with signals held (a second Ctrl-C cannot leave it running):
    what a start that fails or is interrupted halfway does before it re-raises."""
    if process is not None:
        with signals_held():
            stop_processes([process.pid])
            process.wait()
