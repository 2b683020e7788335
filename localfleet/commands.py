"""Run a controller-side command and turn its failure into one FleetError line that says what was being done."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence

from .errors import FleetError

log = logging.getLogger(__name__)


def last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run(argv: Sequence[str], doing: str, fix: str = "", **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run with captured text output; a non-zero exit raises FleetError naming `doing` and its last line."""
    log.debug("running %s", " ".join(map(str, argv)))
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    try:
        done = subprocess.run(list(map(str, argv)), **kwargs)
    except FileNotFoundError as error:
        raise FleetError(f"{doing}: {error.filename} is not installed{' — ' + fix if fix else ''}") from None
    if done.returncode != 0:
        why = last_line(done.stderr) if done.stderr and done.stderr.strip() else last_line(done.stdout)
        raise FleetError(f"{doing} failed (exit {done.returncode}): {why}{' — ' + fix if fix else ''}")
    return done
