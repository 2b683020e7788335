"""Booted test workstations: a host's root run by `systemd-nspawn --boot`, with systemd as its PID 1 and sshd as its
systemd service on the host's loopback port, rebooted as a real workstation is.

    launcher = start_container(root, "ws1", machine, cgroup_paths, console_log)   # returns at once
    leader = wait_until_booted(launcher, cgroup, "ws1", console_log)             # systemd's boot has finished
    subprocess.run(inside(leader, ["systemctl", "is-enabled", "ssh"]))

What a booted host shares with the controller: the kernel and the network namespace (sshd listens on 127.0.0.1:PORT
as a chroot host's does, and apt reaches Debian's archive). What it does not: mounts, process ids, host name, IPC and
cgroups are its own; /sys and /proc/sys are read-only (nspawn's), so nothing in it changes the controller's settings;
/run is its own tmpfs, as on a real machine. /tmp stays the root's own directory (not nspawn's tmpfs), so a file the
controller puts in the host's root is there, as in a chroot. The units that would reach beyond the container or run
on their own mid-test are masked in the base (localfleet/base.py, MASKED_UNITS).

Reboots: the launcher is a shell loop that starts nspawn again whenever the container asks for a reboot (nspawn exits
133 after `systemctl reboot` inside), so `ssh ws1 sudo reboot` brings the host back as a real workstation comes back;
nspawn gives each boot its own /proc/sys/kernel/random/boot_id. Nothing waits a fixed time: for the container's PID 1
to be systemd with its control socket, then for systemd's own word that the boot has finished
(`systemctl is-system-running --wait`), then for sshd's banner.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from .cgroups import FleetCgroups, join
from .commands import last_line
from .errors import FleetError
from .interrupts import signals_held
from .ports import LOOPBACK, bound_elsewhere, ssh_banner
from .procs import ProcessId, start_time

log = logging.getLogger(__name__)

NSPAWN_RUN = Path("/run/systemd/nspawn")  # nspawn's own files on the controller: locks, propagation directories
BOOT_ID = "/proc/sys/kernel/random/boot_id"
REBOOT_EXIT = 133  # nspawn's exit code when the container rebooted
# A hang guard, not a budget: systemd either finishes booting or the container exits, however loaded the machine.
BOOT_CAP_S = 600.0
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# nspawn's /tmp tmpfs off: the root's /tmp, as in a chroot host.
NSPAWN_ENV = {**CLEAN_ENV, "SYSTEMD_NSPAWN_TMPFS_TMP": "0"}

# Runs on the controller, in the host's cgroups (joined before it starts): boot, and boot again after a reboot.
# --resolv-conf/--timezone off: the root keeps the files localfleet gave it; --link-journal=no: nothing of the
# container's journal goes to the controller's /var/log/journal.
_LAUNCH = f"""\
root="$1" machine="$2" name="$3"
while :; do
    systemd-nspawn --quiet --register=no --keep-unit --boot --console=read-only --link-journal=no \
        --resolv-conf=off --timezone=off --machine="$machine" --hostname="$name" --directory="$root"
    code=$?
    [ "$code" -eq {REBOOT_EXIT} ] || exit "$code"
    echo "localfleet: $name rebooting"
done
"""
SSHD_LISTEN = "/etc/ssh/sshd_config.d/localfleet-listen.conf"


class PortTaken(FleetError):
    """The host's sshd could not bind its port (something else took it)."""


def require_nspawn() -> None:
    """Booted hosts need systemd-nspawn on the controller (and the cgroup v2 hierarchy: cgroups.hierarchies)."""
    if shutil.which("systemd-nspawn", path=CLEAN_ENV["PATH"]) is None:
        raise FleetError(
            "systemd-nspawn is not installed on the controller, and booted hosts run under it — apt-get install "
            "systemd-container (bin/bootstrap does), or bring the fleet up with chroots (--chroot, boot=False)"
        )


def machine_name(key: str, host: str) -> str:
    """nspawn's name for the container: unique on the machine (it names nspawn's files in /run/systemd/nspawn)."""
    return f"lf-{key}-{host}"


def write_listen_address(root: Path, port: int) -> None:
    """sshd's port and address as the host's systemd starts it: only 127.0.0.1:PORT (Debian's default would be
    port 22 on every address of the controller, whose network namespace the host shares)."""
    path = root / SSHD_LISTEN.lstrip("/")
    path.write_text(
        f"# localfleet: this host's sshd listens on the controller's loopback only, on a port of its own.\n"
        f"Port {port}\nListenAddress {LOOPBACK}\n"
    )


def start_container(root: Path, name: str, machine: str, cgroups: tuple[Path, ...], console_log: Path) -> ProcessId:
    """Start the launcher of host `name` in its cgroups and return at once (wait_until_booted waits). It is in them
    before it runs anything, so a teardown that kills the cgroups finds it, however early an interruption lands."""
    console_log.parent.mkdir(parents=True, exist_ok=True)
    with open(console_log, "ab") as out, signals_held():
        process = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCH, "localfleet-boot", str(root), machine, name],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=NSPAWN_ENV,
            start_new_session=True,  # Ctrl-C in the controller's terminal must not reach it: teardown stops it
            preexec_fn=lambda: join(cgroups),
        )
    return ProcessId.of(process.pid) or ProcessId(process.pid, 0)


def leader(cgroup: Path) -> int | None:
    """The pid (as the controller sees it) of the container's PID 1, or None while there is none."""
    payload = cgroup / "payload"
    for directory, _, files in os.walk(payload):
        if "cgroup.procs" not in files:
            continue
        try:
            pids = Path(directory, "cgroup.procs").read_text().split()
        except FileNotFoundError:
            continue
        for pid in pids:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            ids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            if len(ids) > 1 and ids[-1] == "1":
                return int(pid)
    return None


def inside(leader_pid: int, argv: list[str]) -> list[str]:
    """The controller-side argv that runs `argv` in the booted host whose PID 1 is `leader_pid`: in its mount, PID,
    UTS, IPC and cgroup namespaces (its files, processes and host name), as root. The command is killed when
    nsenter is (which forks it and does not pass signals on), so stopping the returned process stops the command."""
    return [
        "nsenter",
        f"--target={leader_pid}",
        "--mount",
        "--uts",
        "--ipc",
        "--pid",
        "--cgroup",
        "--",
        "setpriv",
        "--pdeathsig",
        "KILL",
        "--",
        *argv,
    ]


def run_inside(leader_pid: int, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        inside(leader_pid, argv), capture_output=True, text=True, env=CLEAN_ENV, timeout=timeout, check=False
    )


def wait_until_booted(
    launcher: ProcessId, cgroup: Path, name: str, console_log: Path, after: ProcessId | None = None
) -> int:
    """Wait until the host's systemd has finished booting (running, or degraded: a unit failed) and return its pid.
    after: the PID 1 of the boot before (a reboot): wait for a new one. Raises FleetError, with the console's last
    line, when the launcher exits instead."""
    give_up = time.monotonic() + BOOT_CAP_S
    while True:
        found = leader(cgroup)
        if found and (after is None or ProcessId.of(found) != after):
            if os.path.exists(f"/proc/{found}/root/run/systemd/private"):  # systemd's control socket: it listens
                break
        if not launcher.alive():
            raise FleetError(
                f"{name}: the container exited while booting: {_last_console_line(console_log)} — log {console_log}"
            )
        if time.monotonic() > give_up:
            raise FleetError(f"{name}: systemd did not start in {BOOT_CAP_S:.0f} s — log {console_log}")
        time.sleep(0.02)
    done = run_inside(found, ["systemctl", "is-system-running", "--wait"], timeout=BOOT_CAP_S)
    state = done.stdout.strip()
    if state == "degraded":
        failed = run_inside(found, ["systemctl", "--failed", "--plain", "--no-legend", "--no-pager"]).stdout
        log.info("%s booted, degraded: %s", name, " ".join(line.split()[0] for line in failed.splitlines() if line))
    elif state != "running":
        raise FleetError(
            f"{name}: systemd says {state or last_line(done.stderr)!r} instead of running after its boot — "
            f"log {console_log}"
        )
    return found


def sshd_answers(leader_pid: int, name: str, port: int, console_log: Path) -> None:
    """Return once the host's ssh.service is active and answers on its port with an SSH banner; PortTaken when it
    failed because the port is taken, FleetError for any other failure."""
    state = run_inside(leader_pid, ["systemctl", "is-active", "ssh.service"]).stdout.strip()
    if state != "active":
        # The journal says why — once journald has read sshd's last lines, which may come after the unit failed: the
        # port is also asked of the kernel, where another program's socket on it is there for as long as it holds it.
        journal = run_inside(leader_pid, ["journalctl", "--boot", "--unit=ssh.service", "--no-pager", "-o", "cat"])
        taken = [line.strip() for line in journal.stdout.splitlines() if "Address already in use" in line]
        if not taken and bound_elsewhere(port):
            taken = [f"{LOOPBACK}:{port} is bound by another program"]
        error = PortTaken if taken else FleetError
        raise error(
            f"sshd of {name} on {LOOPBACK}:{port} is {state or 'unknown'}: "
            f"{taken[0] if taken else last_line(journal.stdout)} — `journalctl -u ssh` in the host"
        )
    # Type=notify: active means it listens; the banner comes once it has accepted and re-executed itself.
    give_up = time.monotonic() + BOOT_CAP_S
    while not ssh_banner(port, timeout_s=max(give_up - time.monotonic(), 1.0)).startswith("SSH-2.0-"):
        if time.monotonic() > give_up:
            raise FleetError(f"sshd of {name} on {LOOPBACK}:{port} is active but never answered — log {console_log}")
        time.sleep(0.02)


def boot_id(leader_pid: int) -> str:
    """The host's boot id (nspawn's, new at every boot), read through its PID 1's view of its files."""
    return Path(f"/proc/{leader_pid}/root{BOOT_ID}").read_text().strip()


def stop_containers(fleet_dir: Path) -> None:
    """Stop every booted host of the fleet in `fleet_dir` — found from the directory alone, so also after a killed
    controller — and remove what nspawn leaves on the controller when it is killed: its lock files and propagation
    directories. Does nothing for a fleet without booted hosts."""
    try:
        cgroups = FleetCgroups.of(fleet_dir)
    except FleetError:  # no cgroup v2 on this machine: no host can have booted here
        return
    namespaces = _pid_namespaces(cgroups)
    roots = _host_roots(fleet_dir)
    cgroups.kill()
    # Commands run in the hosts (nsenter) are not in their cgroups but in their PID namespaces, which the kernel
    # empties once their PID 1 has gone: wait for that, so that nothing still writes in a root about to be unmounted.
    give_up = time.monotonic() + BOOT_CAP_S
    while namespaces and _processes_in(namespaces):
        if time.monotonic() > give_up:
            raise FleetError(f"processes {_processes_in(namespaces)} of fleet {fleet_dir.name} outlived its hosts")
        time.sleep(0.02)
    for root in roots:
        _remove_nspawn_lock(root)
    for place in ("propagate", "unix-export"):
        for directory in (NSPAWN_RUN / place).glob(machine_name(cgroups.key, "*")):
            shutil.rmtree(directory, ignore_errors=True)


def _host_roots(fleet_dir: Path) -> list[Path]:
    return sorted(path for path in (fleet_dir / "hosts").glob("*/root") if path.is_dir())


def _pid_namespaces(cgroups: FleetCgroups) -> set[str]:
    """The PID namespaces of the fleet's running hosts ("pid:[INODE]")."""
    top = cgroups.tops[0]
    found = set()
    for host in top.iterdir() if top.is_dir() else ():
        pid = leader(host) if host.is_dir() else None
        try:
            if pid:
                found.add(os.readlink(f"/proc/{pid}/ns/pid"))
        except OSError:  # gone meanwhile
            continue
    return found


def _processes_in(namespaces: set[str]) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") in namespaces and start_time(int(entry.name)) is not None:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _remove_nspawn_lock(root: Path) -> None:
    """nspawn's lock of the root (/run/systemd/nspawn/locks/inode-DEV:INO): left behind when nspawn is killed, with
    nobody holding it; one that is held (an nspawn still running on the root) stays."""
    try:
        info = os.stat(root)
    except OSError:
        return
    path = NSPAWN_RUN / "locks" / f"inode-{info.st_dev}:{info.st_ino}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path.unlink(missing_ok=True)
    except BlockingIOError:
        log.warning("%s is locked by a running systemd-nspawn: left alone", path)
    finally:
        os.close(fd)


def _last_console_line(console_log: Path) -> str:
    try:
        with open(console_log, "rb") as log_file:
            log_file.seek(max(0, log_file.seek(0, os.SEEK_END) - 4096))
            return last_line(log_file.read())
    except OSError:
        return "(no console log)"
