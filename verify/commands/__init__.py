"""One module per `python -m verify` subcommand; each has `register(subparsers)` and sets `run` on its parser.

Shared by them: `seconds` (a numeric argument that must be a finite number of seconds in range: `nan`, `inf` and
`1e300` are bad usage, one line and exit 2, not a traceback later), `write_stdout` (the command's output; a write
that fails — /dev/full, a closed pipe — is `OutputError` or BrokenPipeError, which verify/cli.py turns into one line
and exit 2, or a quiet end for `… | head`) and `say` (one line of the command's own, on stdout or stderr). What they
print is made inert first (verify/report/host_input.py): it is made of the host's text — file names in the venv are
its owner's, the probe's error text is the owner's code's — and a root process must not print a control sequence to an
admin's terminal or the journal.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from verify.report.host_input import inert, inert_text


class OutputError(Exception):
    """Writing the command's output failed (not a closed pipe): the message is the system's reason."""


def seconds(maximum: float, *, zero_means: str | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds above 0 (or 0 itself, when `zero_means` says what it means) and
    at most `maximum`."""
    lowest = "from 0" if zero_means else "above 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > 0 or (value == 0 and zero_means)) and value <= maximum):
            zero = f"; 0 {zero_means}" if zero_means else ""
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds {lowest} up to {maximum:g}{zero}")
        return value

    return parse


def write_result(as_json: bool, document: Callable[[], Any], text: Callable[[], str]) -> None:
    """The command's result: `document()` as indented JSON (--json), else `text()`."""
    write_stdout(json.dumps(document(), indent=2) + "\n" if as_json else text())


def say(line: str, *, error: bool = False) -> None:
    """One line of the command's own, inert, on stdout (or stderr: `error`)."""
    print(inert(line), file=sys.stderr if error else sys.stdout)


def write_stdout(text: str) -> None:
    """Write and flush the command's output now, inert (line feeds and tabs kept), so that a failing write is seen
    here and not at interpreter exit."""
    try:
        sys.stdout.write(inert_text(text))
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as error:  # ValueError: stdout was closed
        raise OutputError(getattr(error, "strerror", None) or str(error)) from None
