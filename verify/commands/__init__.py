"""One module per `python -m verify` subcommand; each has `register(subparsers)` and sets `run` on its parser.

Shared by them: `seconds` (a numeric argument that must be a finite number of seconds in range: `nan`, `inf` and
`1e300` are bad usage, one line and exit 2, not a traceback later) and `write_stdout` (the command's output; a write
that fails — /dev/full, a closed pipe — is `OutputError` or BrokenPipeError, which verify/cli.py turns into one line
and exit 2, or a quiet end for `… | head`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any


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


def write_stdout(text: str) -> None:
    """Write and flush the command's output now, so that a failing write is seen here and not at interpreter exit."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as error:  # ValueError: stdout was closed
        raise OutputError(getattr(error, "strerror", None) or str(error)) from None
