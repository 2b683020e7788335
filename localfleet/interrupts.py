"""Ctrl-C and SIGTERM for the commands that bring fleets up (`python -m localfleet`, bin/demo): the first signal
unwinds the program like KeyboardInterrupt, so whatever was started is torn down on the way out; a teardown is never
broken into by another one."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator

log = logging.getLogger("localfleet")

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_unwinding: list[int] = []  # the signal that started the unwinding, once one has


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (its name is the message)."""


def _unwind_once(signum: int, frame) -> None:
    # Only the first signal unwinds; a second one must not break into the teardown that the first one started
    # (Fleet.up's own, after a failed or interrupted up, or the caller's).
    if _unwinding:
        log.warning("%s: already tearing down, please wait", signal.Signals(signum).name)
        return
    _unwinding.append(signum)
    raise Interrupted(signal.Signals(signum).name)


def unwind_on_signals() -> None:
    """Make SIGINT and SIGTERM unwind the program (the first one only), and make sure both can reach it.

    A signal mask survives fork and exec: started by a parent that blocks SIGTERM (some CI runners and service
    managers do), a handler alone would never run — `timeout` or `systemctl stop` would be ignored until the whole
    deploy had finished, and a fleet killed later would leave its mounts and sshd behind.
    """
    for s in SIGNALS:
        signal.signal(s, _unwind_once)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Around a teardown that no signal has started: a Ctrl-C/SIGTERM meanwhile must not leave half a teardown, so it
    is noted, and raised as Interrupted once the teardown is done."""
    pending: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            raise Interrupted(signal.Signals(pending[0]).name)
