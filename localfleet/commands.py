"""Run a controller-side command and turn its failure into one FleetError line that says what was being done; the
command never outlives the call that runs it, nor (die_with_parent) the controller."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
from collections.abc import Sequence

from .errors import FleetError
from .interrupts import signals_held

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


def run_child(
    argv: Sequence[str], *, input: str | bytes | None = None, capture_output: bool = False, **kwargs
) -> subprocess.CompletedProcess:
    """subprocess.run(argv, …) to the child's end (no time limit, no check), but no exception — a signal's included —
    ever leaves the child running: it is killed and reaped before the exception goes on.

    subprocess.run does not promise that: a signal whose handler raises while Popen waits for the child's exec leaves
    the child running, unknown to anyone (interrupts.signals_held). A helper that is not rooted in a host is invisible
    to teardown, so it must never outlive the call that started it.
    """
    kwargs.setdefault("preexec_fn", die_with_parent)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    process = None
    try:
        with signals_held():
            process = subprocess.Popen(list(map(str, argv)), **kwargs)
        stdout, stderr = process.communicate(input)
    except BaseException:
        if process is not None:
            with signals_held():
                process.kill()
                process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run(argv: Sequence[str], doing: str, fix: str = "", **kwargs) -> subprocess.CompletedProcess:
    """run_child with captured text output; a non-zero exit raises FleetError naming `doing` and its last line."""
    log.debug("running %s", " ".join(map(str, argv)))
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    try:
        done = run_child(argv, **kwargs)
    except FileNotFoundError as error:
        raise FleetError(f"{doing}: {error.filename} is not installed{' — ' + fix if fix else ''}") from None
    if done.returncode != 0:
        why = last_line(done.stderr) if done.stderr and done.stderr.strip() else last_line(done.stdout)
        raise FleetError(f"{doing} failed (exit {done.returncode}): {why}{' — ' + fix if fix else ''}")
    return done
