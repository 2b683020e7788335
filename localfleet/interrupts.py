"""Ctrl-C and SIGTERM for the commands that bring fleets up (`python -m localfleet`, bin/demo): either signal unwinds
the program like KeyboardInterrupt, so whatever was started is torn down on the way out."""

from __future__ import annotations

import signal
from typing import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (its name is the message)."""


def raise_interrupted(signum: int, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def unwind_on_signals(handler: Callable[[int, object], None] = raise_interrupted) -> None:
    """Install `handler` for SIGINT and SIGTERM, and make sure both can reach it.

    A signal mask survives fork and exec: started by a parent that blocks SIGTERM (some CI runners and service
    managers do), a handler alone would never run — `timeout` or `systemctl stop` would be ignored until the whole
    deploy had finished, and a fleet killed later would leave its mounts and sshd behind.
    """
    for s in SIGNALS:
        signal.signal(s, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
