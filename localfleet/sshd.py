"""Start and stop a host's sshd: `chroot ROOT /usr/sbin/sshd` on a loopback port, in its own UTS namespace.

The UTS namespace only gives each host its own host name (`uname -n`, pyinfra's hostname fact, reports); network,
processes and mounts stay the controller's, which is what lets apt in a host reach Debian's archive.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from .commands import last_line
from .errors import FleetError
from .interrupts import signals_held
from .ports import LOOPBACK, ssh_banner
from .procs import ProcessId, stop_processes, stop_started

log = logging.getLogger(__name__)

CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# Runs on the controller: set the new namespace's host name, then become sshd inside the root (same pid throughout).
_LAUNCH = 'hostname "$1" && exec chroot "$2" /usr/sbin/sshd -D -e -p "$3" -o ListenAddress="$4" -o PidFile=none'


class PortTaken(FleetError):
    """sshd could not bind its port (something else took it)."""


# A hang guard, not a budget: sshd either says it listens or exits, however loaded the machine; only a broken one
# (stuck before listening) takes this long, and up then fails with its log rather than waiting for ever.
STARTUP_CAP_S = 600.0


def start_sshd(root: Path, name: str, port: int, log_path: Path) -> tuple[subprocess.Popen, ProcessId]:
    """Start sshd for host `name` and return once it listens and answers with an SSH banner, or raise once it has
    exited. Until it returns, the sshd is this call's: whatever interrupts the wait stops it before going on — the
    launcher is not inside the host's root until it has chrooted, so teardown could not find it there."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0
    process = None
    try:
        with open(log_path, "ab") as out, signals_held():
            process = subprocess.Popen(
                [
                    "unshare",
                    "--uts",
                    "--",
                    "/bin/sh",
                    "-c",
                    _LAUNCH,
                    "localfleet-sshd",
                    name,
                    str(root),
                    str(port),
                    LOOPBACK,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=CLEAN_ENV,
                # Ctrl-C in the controller's terminal must not reach it: teardown stops it in order.
                start_new_session=True,
            )
        ident = ProcessId.of(process.pid)
        _wait_until_it_answers(process, name, port, log_path, offset)
    except BaseException:
        stop_started(process)
        raise
    log.debug("sshd of %s listens on %s:%d (pid %d)", name, LOOPBACK, port, process.pid)
    return process, ident or ProcessId(process.pid, 0)


def _wait_until_it_answers(process: subprocess.Popen, name: str, port: int, log_path: Path, offset: int) -> None:
    listening = f"Server listening on {LOOPBACK} port {port}."
    give_up = time.monotonic() + STARTUP_CAP_S
    while True:
        new_output = _read_from(log_path, offset)
        if process.poll() is not None:
            taken = [line for line in new_output.splitlines() if "Address already in use" in line]
            reason = taken[0].strip() if taken else last_line(new_output)
            error = PortTaken if taken else FleetError
            raise error(
                f"sshd of {name} on {LOOPBACK}:{port} exited (code {process.returncode}): {reason} — log {log_path}"
            )
        left = give_up - time.monotonic()
        # Listening: the kernel queues a connection at once; the banner comes when sshd has accepted and re-executed
        # itself for it (seconds on a loaded machine): wait for it, not for a fixed time.
        if listening in new_output and ssh_banner(port, timeout_s=max(left, 1.0)).startswith("SSH-2.0-"):
            return
        if left <= 0:
            raise FleetError(
                f"sshd of {name} on {LOOPBACK}:{port} neither answered nor exited in {STARTUP_CAP_S:.0f} s "
                f"— log {log_path}"
            )
        time.sleep(0.02)


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def stop_sshd(ident: ProcessId | None) -> None:
    """Stop the listening sshd (sessions already open end when their client goes, as with `systemctl stop ssh`)."""
    if ident is not None and ident.alive():
        stop_processes([ident.pid])
