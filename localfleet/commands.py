"""Run a controller-side command and turn its failure into one FleetError line that says what was being done."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
from collections.abc import Sequence

from .errors import FleetError

log = logging.getLogger(__name__)


def last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the controller dies, even by SIGKILL.

    Without it, a `cp` of a host root outlives a killed `up` and keeps writing into the tree that the next `down`
    is deleting; it is not rooted in the tree, so teardown would not find it.
    """
    parent = os.getppid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def run(argv: Sequence[str], doing: str, fix: str = "", **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run with captured text output; a non-zero exit raises FleetError naming `doing` and its last line."""
    log.debug("running %s", " ".join(map(str, argv)))
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("preexec_fn", die_with_parent)
    try:
        done = subprocess.run(list(map(str, argv)), **kwargs)
    except FileNotFoundError as error:
        raise FleetError(f"{doing}: {error.filename} is not installed{' — ' + fix if fix else ''}") from None
    if done.returncode != 0:
        why = last_line(done.stderr) if done.stderr and done.stderr.strip() else last_line(done.stdout)
        raise FleetError(f"{doing} failed (exit {done.returncode}): {why}{' — ' + fix if fix else ''}")
    return done
