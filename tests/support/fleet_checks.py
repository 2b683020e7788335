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
    pid: int  # as this machine (the controller) sees it
    root: str  # its root directory (a chroot's, as this machine sees it; "/" for a booted host's, its own)
    name: str  # /proc/PID/comm
    argv: tuple[str, ...]
    host_pid: int  # as its host sees it: the same in a chroot; in a booted host, its pid in the host's PID namespace

    def __str__(self) -> str:
        in_host = f", pid {self.host_pid} in its host" if self.host_pid != self.pid else ""
        return f"{self.pid} ({self.name}, root {self.root}{in_host})"


def _host_roots(directory: Path) -> set[tuple[int, int]]:
    """(device, inode) of `directory` and of the host roots below it, where it is a host's root, a fleet's directory
    or a cache of fleets."""
    found = set()
    for path in [
        directory,
        *(p for pattern in ("hosts/*/root", "fleets/*/hosts/*/root") for p in directory.glob(pattern)),
    ]:
        try:
            info = os.stat(path)
        except OSError:
            continue
        found.add((info.st_dev, info.st_ino))
    return found


def rooted_processes(directory: Path) -> list[RootedProcess]:
    """The processes whose root directory is `directory` or inside it (a host's chroot, or a whole fleet's) — also
    those of a booted host, which has its root as its own in a mount namespace of its own, where its path reads "/":
    they are found by the root's device and inode."""
    top = os.path.realpath(directory)
    roots = _host_roots(Path(top))
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            root = os.readlink(f"/proc/{pid}/root")
            inside = root == top or root.startswith(top + "/")
            if not inside and root == "/":
                info = os.stat(f"/proc/{pid}/root")
                inside = (info.st_dev, info.st_ino) in roots
            if not inside:
                continue
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            host_pid = _innermost_pid(pid)
        except OSError:  # gone meanwhile
            continue
        found.append(RootedProcess(int(pid), root, name, tuple(argv), host_pid))
    return found


def _innermost_pid(pid: str) -> int:
    """The pid of process `pid` in its own PID namespace (the last of /proc/PID/status's NSpid): what `ps`, apt's
    "held by process …" and $$ say inside its host."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")))


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


# --- booted hosts (systemd-nspawn) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootedHost:
    """What a running booted host is made of, as the kernel shows it (taken while it runs, to check after teardown
    that none of it is left): its nspawn process, that process's cgroup v2 directory (/proc/PID/cgroup), nspawn's
    machine name (its command line) and the lock file nspawn keeps for its root (named by the root's device and
    inode)."""

    nspawn_pid: int
    machine: str
    cgroup: str  # the host's cgroup, as a path under the cgroup2 mount (the parent of nspawn's supervisor/)
    lock: str

    def leftovers(self, cgroup2_mount: str) -> list[str]:
        found = []
        if os.path.exists(f"/proc/{self.nspawn_pid}/cmdline") and "systemd-nspawn" in command_line(self.nspawn_pid):
            found.append(f"nspawn {self.nspawn_pid} of {self.machine} running")
        if os.path.isdir(cgroup2_mount + self.cgroup):
            found.append(f"cgroup {self.cgroup}")
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if _zombie(pid):  # holds nothing: its parent has yet to reap it
                continue
            if _cgroup2_of(pid).startswith(self.cgroup + "/") or _cgroup2_of(pid) == self.cgroup:
                found.append(f"process {pid} ({command_line(pid)[:60]}) in {self.cgroup}")
        for place in ("propagate", "unix-export"):
            if os.path.exists(f"/run/systemd/nspawn/{place}/{self.machine}"):
                found.append(f"/run/systemd/nspawn/{place}/{self.machine}")
        if os.path.exists(self.lock):
            found.append(self.lock)
        return found


def cgroup2_mount() -> str:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split(" - ")[1].split()[0] == "cgroup2":
            return line.split()[4]
    raise AssertionError("no cgroup2 mount")


def command_line(pid) -> str:
    """/proc/PID/cmdline, its arguments joined by spaces ("" for a process gone, or a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _zombie(pid) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone
    return stat[stat.rindex(")") + 2] in "ZX"


def _cgroup2_of(pid) -> str:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return ""
    return next((line[3:] for line in lines if line.startswith("0::")), "")


def booted_hosts(directory: Path) -> list[BootedHost]:
    """The booted hosts whose roots are in `directory` (a fleet's), found by their nspawn processes' command lines."""
    top = os.path.realpath(directory)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        argv = command_line(pid).split()
        if not argv or not argv[0].endswith("systemd-nspawn"):
            continue
        roots = [a.split("=", 1)[1] for a in argv if a.startswith("--directory=")]
        machines = [a.split("=", 1)[1] for a in argv if a.startswith("--machine=")]
        if not roots or not roots[0].startswith(top + "/") or "/payload" in _cgroup2_of(pid):
            continue  # (in payload/: nspawn's child, not yet the container's init)
        info = os.stat(roots[0])
        cgroup = _cgroup2_of(pid).removesuffix("/supervisor")
        lock = f"/run/systemd/nspawn/locks/inode-{info.st_dev}:{info.st_ino}"
        found.append(BootedHost(int(pid), machines[0], cgroup, lock))
    return found


def booted_leftovers(hosts: list[BootedHost]) -> list[str]:
    mount = cgroup2_mount()
    return [line for host in hosts for line in host.leftovers(mount)]


def listening_sockets_of(pids) -> list[str]:
    """ "ADDRESS:PORT" of every listening TCP socket (IPv4 and IPv6) that one of `pids` holds open."""
    inodes = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            found.append(f"{_address(address, width)}:{int(port, 16)}")
    return found


def _address(hex_address: str, width: int) -> str:
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(hex_address)[::-1])
    raw = b"".join(bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw)
