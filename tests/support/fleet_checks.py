"""What a torn-down local fleet must not leave behind, read straight from the kernel — deliberately not through
localfleet's own code, so that tests of localfleet's teardown do not grade themselves."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


def mounts_inside(directory: Path) -> list[str]:
    top = os.path.realpath(directory)
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = (
            line.split()[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        )
        if point == top or point.startswith(top + "/"):
            found.append(point)
    return found


@dataclass(frozen=True)
class RootedProcess:
    pid: int
    root: str  # its root directory (a chroot's, as this machine sees it)
    name: str  # /proc/PID/comm
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.pid} ({self.name}, root {self.root})"


def rooted_processes(directory: Path) -> list[RootedProcess]:
    """The processes whose root directory is `directory` or inside it (a host's chroot, or a whole fleet's)."""
    top = os.path.realpath(directory)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            root = os.readlink(f"/proc/{pid}/root")
            if not (root == top or root.startswith(top + "/")):
                continue
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:  # gone meanwhile
            continue
        found.append(RootedProcess(int(pid), root, name, tuple(argv)))
    return found


def kernel_stack(pid: int) -> str:
    """/proc/PID/stack (root only): the kernel functions a process is blocked in, e.g. "hrtimer_nanosleep" while it
    sleeps; "" when it has gone."""
    try:
        return Path(f"/proc/{pid}/stack").read_text()
    except OSError:
        return ""


def processes_inside(directory: Path) -> list[str]:
    return [str(process) for process in rooted_processes(directory)]


def listening(ports) -> list[int]:
    open_ports = []
    for port in ports:
        with socket.socket() as client:
            client.settimeout(1)
            if client.connect_ex(("127.0.0.1", port)) == 0:
                open_ports.append(port)
    return open_ports


def leftovers(directory: Path, ports=()) -> list[str]:
    """One line per thing left: a mount in `directory`, a process rooted in it, a port still accepting connections."""
    return (
        [f"mount {m}" for m in mounts_inside(directory)]
        + [f"process {p}" for p in processes_inside(directory)]
        + [f"port {p} listening" for p in listening(ports)]
    )
