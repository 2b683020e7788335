"""Loopback TCP ports: pick a free one, and tell whether something listens on one."""

from __future__ import annotations

import errno
import socket

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A port nothing listens on right now. Another process may take it before sshd binds it: callers retry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def bound_elsewhere(port: int) -> bool:
    """Whether another socket holds LOOPBACK:port, so that a server's bind there fails as sshd's does (EADDRINUSE,
    with SO_REUSEADDR set as sshd sets it: a connection left in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return True
            raise
        return False


def is_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        client.settimeout(1)
        return client.connect_ex((LOOPBACK, port)) == 0


def ssh_banner(port: int, timeout_s: float = 5.0) -> str:
    """The identification line an SSH server sends first ("SSH-2.0-OpenSSH_9.2p1 …"), or "" if none came."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout_s) as client:
            return client.makefile("rb").readline(256).decode(errors="replace").strip()
    except OSError:
        return ""
