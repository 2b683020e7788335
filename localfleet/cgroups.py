"""The control groups of booted hosts: one per host, under one per fleet, made by localfleet and removed at teardown.

    <cgroup v2>/localfleet/<fleet key>/ws1/          the host's launcher; below it nspawn's supervisor/ and payload/
    <name=systemd v1>/localfleet/<fleet key>/ws1/    the same path in systemd's v1 hierarchy, where the machine has one

Why a cgroup of its own: `systemd-nspawn --keep-unit` runs the container in payload/ below the cgroup it was started
in. Started in the controller's (the root, on this machine), every container would share one payload/, and the
systemds inside would manage — and stop — each other's units. In both hierarchies: on a machine that mounts
systemd's v1 hierarchy beside v2 (cgroup "hybrid"), the containers' systemd works in both. Nothing is limited or
accounted: no controller is enabled.

It also gives teardown every process of a fleet's hosts from the fleet's directory alone, whoever started them and
whether or not that controller still runs: the fleet key is made from the directory's path, and cgroup.kill (Linux
5.14) kills all that is below a cgroup at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import FleetError
from .mounts import current_mounts

log = logging.getLogger(__name__)

TOP = "localfleet"
# A hang guard, not a budget: SIGKILLed processes leave as soon as their current system call returns.
EMPTY_CAP_S = 600.0


@dataclass(frozen=True)
class Hierarchies:
    v2: Path  # where cgroup2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid machine)
    systemd_v1: Path | None  # systemd's own v1 hierarchy (name=systemd), where the machine mounts one


def hierarchies() -> Hierarchies:
    """The machine's cgroup hierarchies, read from /proc/self/mountinfo."""
    mounts = current_mounts()
    v2 = [Path(m.mount_point) for m in mounts if m.fstype == "cgroup2"]
    v1 = [Path(m.mount_point) for m in mounts if m.fstype == "cgroup" and "name=systemd" in m.options.split(",")]
    if not v2:
        raise FleetError(
            "booted hosts need the cgroup v2 hierarchy, and none is mounted on this machine — mount it (`mount -t "
            "cgroup2 none /sys/fs/cgroup/unified`), or bring the fleet up with chroots (--chroot, boot=False)"
        )
    return Hierarchies(v2[0], v1[0] if v1 else None)


def fleet_key(fleet_dir: Path) -> str:
    """A short name for a fleet that no other fleet on this machine has: two checkouts can both have a fleet
    "default", never at the same path."""
    return hashlib.sha256(os.path.realpath(fleet_dir).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class FleetCgroups:
    """The cgroups of one fleet's booted hosts (they exist only while one runs)."""

    key: str
    tops: tuple[Path, ...]  # the fleet's cgroup in each hierarchy, v2 first

    @classmethod
    def of(cls, fleet_dir: Path, found: Hierarchies | None = None) -> FleetCgroups:
        found = found or hierarchies()
        key = fleet_key(fleet_dir)
        return cls(key, tuple(h / TOP / key for h in (found.v2, found.systemd_v1) if h is not None))

    def host(self, name: str) -> tuple[Path, ...]:
        """The host's cgroup in each hierarchy (v2 first)."""
        return tuple(top / name for top in self.tops)

    def make(self, name: str) -> tuple[Path, ...]:
        paths = self.host(name)
        for path in paths:
            path.mkdir(parents=True, exist_ok=True)
        return paths

    def kill(self) -> None:
        """Kill every process of the fleet's hosts and wait until they are gone; then remove the cgroups."""
        v2 = self.tops[0]
        if not v2.is_dir():
            return
        started = time.monotonic()
        while populated(v2):
            if (v2 / "cgroup.kill").exists():
                (v2 / "cgroup.kill").write_text("1")
            else:  # before Linux 5.14: one by one (a process forked meanwhile is found on the next round)
                for pid in pids_in(v2):
                    _kill(pid)
            if time.monotonic() - started > EMPTY_CAP_S:
                raise FleetError(
                    f"processes {pids_in(v2)} in {v2} are still there {EMPTY_CAP_S:.0f} s after SIGKILL (stuck in the "
                    "kernel?) — see `ps -o pid,stat,wchan:30,cmd -p PID`, then run `python -m localfleet down` again"
                )
            time.sleep(0.02)
        for top in self.tops:
            remove(top)
        log.debug("cgroups of fleet %s removed", self.key)


def populated(cgroup: Path) -> bool:
    """Whether any process is in `cgroup` or below it (cgroup v2)."""
    try:
        events = (cgroup / "cgroup.events").read_text()
    except FileNotFoundError:
        return False
    return "populated 1" in events.splitlines()


def pids_in(cgroup: Path) -> list[int]:
    """Every process in `cgroup` and below it."""
    found = []
    for directory, _, files in os.walk(cgroup):
        if "cgroup.procs" in files:
            try:
                found += [int(pid) for pid in Path(directory, "cgroup.procs").read_text().split()]
            except FileNotFoundError:  # removed meanwhile
                continue
    return found


def join(paths: tuple[Path, ...]) -> None:
    """Move the calling process into these cgroups (a preexec_fn: the child is in them before it runs anything)."""
    for path in paths:
        with open(path / "cgroup.procs", "w") as procs:
            procs.write("0")


def remove(cgroup: Path) -> None:
    """Remove an empty cgroup and the ones below it, then its parent localfleet/ if no other fleet uses it."""
    if not cgroup.is_dir():
        return
    for directory, _, _ in os.walk(cgroup, topdown=False):
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError as error:  # EBUSY: a process is still in it
            raise FleetError(
                f"cannot remove the cgroup {directory}: {error.strerror} — see its cgroup.procs, stop what runs "
                "there, then run `python -m localfleet down` again"
            ) from None
    try:
        cgroup.parent.rmdir()  # localfleet/: only when it is empty
    except OSError:
        pass


def memory_kib(cgroup: Path) -> int:
    """The proportional set size (PSS) of the processes in `cgroup` and below it, in KiB: the memory they take, each
    page shared with other processes counted in shares."""
    total = 0
    for pid in pids_in(cgroup):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
