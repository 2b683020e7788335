"""Ctrl-C and SIGTERM for the commands that bring fleets up (`python -m localfleet`, bin/demo): the first signal
unwinds the program like KeyboardInterrupt, so whatever was started is torn down on the way out; a teardown is never
broken into by another one. Also, for any caller: starting a child process is never broken into (signals_held)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
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


def raise_if_interrupted() -> None:
    """A checkpoint on the way to "up": raise Interrupted if a signal asked for unwinding and the program still goes on.

    Python drops an exception raised in some places — an at-fork hook, a __del__ method, a finalizer ("Exception
    ignored in: …") — and a handler runs wherever the program happens to be. A signal whose Interrupted was dropped
    would be lost, and since only the first signal unwinds, so would every later one: `up` would finish and exit 0.
    Called before each host and before a fleet is declared up, so such a signal still unwinds, a step later.
    """
    if _unwinding:
        raise Interrupted(signal.Signals(_unwinding[0]).name)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Around a few statements that must not be broken into — starting a child process and keeping its Popen: a
    SIGINT or SIGTERM meanwhile is noted, and delivered to the program's own handler when the block ends.

    An exception from a handler while subprocess.Popen waits for its child's exec leaves that child running with
    nobody holding its pid: a `cp` of a host root went on writing into the fleet that the teardown was deleting. One
    raised in Popen's at-fork hooks is dropped by Python, and the signal lost (see raise_if_interrupted).
    Python runs signal handlers in the main thread only: in any other thread nothing can break in, and this does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread() or None in map(signal.getsignal, SIGNALS):
        yield  # (None: a handler installed by C code, which Python could not put back)
        return
    held: list[int] = []
    previous: dict[int, object] = {}
    try:
        for s in SIGNALS:
            previous[s] = signal.signal(s, lambda signum, frame: held.append(signum))
        yield
    finally:
        _restore(list(previous.items()))
    for signum in held[:1]:  # the first one, as if it had just arrived (a second one would only repeat it)
        signal.raise_signal(signum)


def _restore(handlers: list[tuple[int, object]]) -> None:
    # One finally per handler: a signal that a restored handler turns into an exception must not leave the other
    # signal with the note-taking handler of signals_held.
    if not handlers:
        return
    (signum, handler), rest = handlers[0], handlers[1:]
    try:
        signal.signal(signum, handler)
    finally:
        _restore(rest)


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
