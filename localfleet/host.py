"""One test workstation of a running fleet, and what tests do with it: run a command inside it, install Debian
packages, hold its dpkg lock, stop and start its sshd, ssh into it, reboot it (a booted host)."""

from __future__ import annotations

import logging
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import container
from .commands import last_line
from .errors import FleetError
from .interrupts import signals_held
from .ports import LOOPBACK, is_listening
from .procs import ProcessId, stop_processes, stop_started
from .sshd import start_sshd, stop_sshd
from .state import HostState

log = logging.getLogger(__name__)


class HostsFleet(Protocol):
    """What a host needs of its fleet (localfleet/fleet.py's Fleet; named here so that host.py imports nothing of
    fleet.py, which imports it)."""

    @property
    def name(self) -> str: ...
    @property
    def login(self) -> str: ...
    @property
    def boot(self) -> bool: ...
    @property
    def client_key(self) -> Path: ...
    @property
    def known_hosts(self) -> Path: ...
    def host_state(self, name: str) -> HostState: ...
    def record_sshd(self, host_name: str, ident: ProcessId | None) -> None: ...
    def sshd_log(self, host_name: str) -> Path: ...
    def console_log(self, host_name: str) -> Path: ...
    def host_cgroup(self, host_name: str) -> Path: ...


HOST_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
    "DEBIAN_FRONTEND": "noninteractive",
}
# On the controller: a UTS namespace with the host's name, then chroot into its root (the command keeps the pid).
_ENTER = 'hostname "$1" && root="$2" && shift 2 && exec chroot "$root" "$@"'

# Runs inside the host with its python3: takes the locks the way apt and dpkg do (fcntl write locks on the whole file,
# lock-frontend first), says so, and keeps them until it is stopped (or the seconds given, if any, have passed).
_HOLD_DPKG_LOCK = """\
import fcntl, os, signal, sys, time
for path in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock"):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(float(sys.argv[1])) if sys.argv[1:] else signal.pause()
"""


@dataclass
class FleetHost:
    fleet: HostsFleet
    name: str
    port: int
    root: Path

    def __repr__(self) -> str:
        return f"FleetHost({self.name!r}, port={self.port}, root={str(self.root)!r})"

    # --- inside the host (chroot, or the booted host's namespaces; no SSH) --------------------------------------------
    def command(self, argv: Sequence[str]) -> list[str]:
        """The controller-side argv that runs `argv` inside this host (for Popen, when run() does not fit): chrooted
        into its root, or, on a booted host, in its namespaces (nsenter) — a process of that host, which its reboot
        or the fleet's teardown ends."""
        if self.fleet.boot:
            return container.inside(self.leader(), list(argv))
        return ["unshare", "--uts", "--", "/bin/sh", "-c", _ENTER, "localfleet-enter", self.name, str(self.root), *argv]

    def leader(self) -> int:
        """A booted host's PID 1 (systemd), as the controller sees it."""
        found = container.leader(self.fleet.host_cgroup(self.name))
        if found is None:
            raise FleetError(
                f"{self.name} is not running (its container has stopped) — see {self.fleet.console_log(self.name)}"
            )
        return found

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: str | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        """Run `argv` as root inside the host (see command()); text output captured. check=True: non-zero exit →
        FleetError."""
        done = subprocess.run(
            self.command(argv),
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            env={**HOST_ENV, **(env or {})},
        )
        if check and done.returncode != 0:
            raise FleetError(
                f"{self.name}: `{shlex.join(argv)}` failed (exit {done.returncode}): "
                f"{last_line(done.stderr if done.stderr.strip() else done.stdout)}"
            )
        return done

    def apt_install(
        self, packages: Sequence[str], *, recommends: bool = True, update: bool = True, lock_timeout_s: int = 120
    ) -> subprocess.CompletedProcess:
        """apt-get install from Debian's real archive inside the host (apt's defaults, Recommends included, unless
        told).

        Maintainer scripts cannot start daemons (the base's policy-rc.d forbids it). Returns apt-get install's result.
        """
        if update:
            self.run(["apt-get", "update", "-q"])
        options = ["-o", f"DPkg::Lock::Timeout={lock_timeout_s}"] + ([] if recommends else ["--no-install-recommends"])
        return self.run(["apt-get", "install", "-y", "-q", *options, *packages])

    def hold_dpkg_lock(self, seconds: float | None = None) -> DpkgLockHolder:
        """Hold /var/lib/dpkg/lock-frontend and /var/lib/dpkg/lock in the host, as a running apt would.

        Returns once the locks are held; release() (or leaving the `with` block, the fleet's teardown, or — only if
        given — `seconds` passing) lets them go.
        """
        limit = [] if seconds is None else [str(seconds)]
        process = None
        try:
            with signals_held():
                process = subprocess.Popen(
                    self.command(["python3", "-c", _HOLD_DPKG_LOCK, *limit]),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=HOST_ENV,
                )
            # "locked" once it holds them, or end of file: it could not take them and exited.
            line = process.stdout.readline()
        except BaseException:
            stop_started(process)
            raise
        if line.strip() != "locked":
            stop_processes([process.pid])
            process.wait()
            raise FleetError(
                f"{self.name}: could not take the dpkg lock: {last_line(process.stderr.read())} "
                "(is apt or dpkg running in this host?)"
            )
        return DpkgLockHolder(self.name, process, _pid_in_host(process.pid) if self.fleet.boot else process.pid)

    # --- sshd -----------------------------------------------------------------------------------------------------
    def sshd_running(self) -> bool:
        if self.fleet.boot:
            return self.run(["systemctl", "is-active", "--quiet", "ssh.service"], check=False).returncode == 0
        state = self.fleet.host_state(self.name)
        return state.sshd is not None and state.sshd.alive()

    def stop_sshd(self) -> None:
        """Stop the host's sshd (the "unreachable host" case): new connections to its port are refused. On a booted
        host, `systemctl stop ssh.service` (sessions already open stay, as there)."""
        if self.fleet.boot:
            self.run(["systemctl", "stop", "ssh.service"])
        else:
            stop_sshd(self.fleet.host_state(self.name).sshd)
            self.fleet.record_sshd(self.name, None)
        # stop_sshd returns once sshd has exited, and the kernel closes a process's sockets before it becomes a
        # zombie (systemctl stop returns once the unit has stopped): a port that still accepts connections now belongs
        # to another program.
        if is_listening(self.port):
            raise FleetError(
                f"{self.name}: port {self.port} still accepts connections after its sshd stopped — "
                f"another program listens there (`ss -ltnp 'sport = {self.port}'`)"
            )

    def start_sshd(self) -> None:
        """Start the host's sshd again, on the same port (so the inventory stays right)."""
        if self.sshd_running():
            return
        if self.fleet.boot:
            self.run(["systemctl", "start", "ssh.service"], check=False)  # sshd_answers says why, if it failed
            container.sshd_answers(self.leader(), self.name, self.port, self.fleet.console_log(self.name))
            return
        _, ident = start_sshd(self.root, self.name, self.port, self.fleet.sshd_log(self.name))
        self.fleet.record_sshd(self.name, ident)

    # --- booting ----------------------------------------------------------------------------------------------------
    def boot_id(self) -> str:
        """The host's /proc/sys/kernel/random/boot_id: a booted host's own, new at each boot (a chroot's is the
        controller's)."""
        return self.run(["cat", container.BOOT_ID]).stdout.strip()

    def reboot(self) -> str:
        """Reboot a booted host as `systemctl reboot` in it does, and return its new boot id once it is back: its
        systemd has finished booting (the units enabled for boot have run) and its sshd answers on the same port.
        Its files are kept (the same root). A chroot host cannot reboot: FleetError."""
        if not self.fleet.boot:
            raise FleetError(
                f"{self.name} is a chroot, which cannot reboot — bring the fleet up with booted hosts "
                "(`python -m localfleet up` without --chroot, `Fleet.up(n)` without boot=False)"
            )
        started = time.monotonic()
        leader = self.leader()
        before, old_boot = ProcessId.of(leader), container.boot_id(leader)
        done = self.run(["systemctl", "reboot"], check=False)
        if done.returncode != 0 and before is not None and before.alive():
            raise FleetError(
                f"{self.name}: `systemctl reboot` failed (exit {done.returncode}): {last_line(done.stderr)}"
            )
        launcher = self.fleet.host_state(self.name).container
        console = self.fleet.console_log(self.name)
        leader = container.wait_until_booted(launcher, self.fleet.host_cgroup(self.name), self.name, console, before)
        container.sshd_answers(leader, self.name, self.port, console)
        new_boot = container.boot_id(leader)
        if new_boot == old_boot:  # nspawn gives every boot its own: the same one means no reboot happened
            raise FleetError(f"{self.name}: still boot {old_boot} after the reboot — log {console}")
        log.info("%s rebooted in %.1f s (boot id %s)", self.name, time.monotonic() - started, new_boot)
        return new_boot

    # --- over SSH, as pyinfra reaches it --------------------------------------------------------------------------
    def ssh_argv(self, user: str | None = None) -> list[str]:
        """OpenSSH client argv for this host, with the fleet's key and known_hosts (strict), no user config."""
        return [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(self.fleet.client_key),
            "-p",
            str(self.port),
            "-o",
            f"UserKnownHostsFile={self.fleet.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"{user or self.fleet.login}@{LOOPBACK}",
        ]

    def ssh(
        self, argv: Sequence[str], *, check: bool = True, user: str | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """`argv` over SSH (no time limit unless given: on a loaded machine sshd may take seconds to answer)."""
        done = subprocess.run(
            [*self.ssh_argv(user), "--", shlex.join(argv)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise FleetError(
                f"{self.name}: ssh `{shlex.join(argv)}` failed (exit {done.returncode}): "
                f"{last_line(done.stderr if done.stderr.strip() else done.stdout)}"
            )
        return done


def _pid_in_host(pid: int) -> int:
    """The pid, in a booted host's own PID namespace, of the command that nsenter `pid` runs there (its one child)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    status = Path(f"/proc/{children[0]}/status").read_text()
    return int(next(line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")))


class DpkgLockHolder:
    """A process inside a host holding its dpkg locks; a context manager that releases them on exit."""

    def __init__(self, host_name: str, process: subprocess.Popen, pid_in_host: int | None = None):
        self.host_name = host_name
        self.process = process
        # apt names this pid in "It is held by process …": in a booted host, the holder's pid there.
        self.pid = pid_in_host or process.pid

    def holding(self) -> bool:
        return self.process.poll() is None

    def release(self) -> None:
        if self.process.poll() is None:
            stop_processes([self.process.pid])
        self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()

    def __enter__(self) -> DpkgLockHolder:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
