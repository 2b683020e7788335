"""Waiting in tests for something to happen: for a condition, never for a number of seconds — a loaded machine is
slow, not wrong, so no budget for something to happen may fail a test.

    pid = wait_for(lambda: child_of(controller), "the controller to start its helper")

The cap is only a hang guard (pytest-timeout also stops any test after 900 s): past it the test fails saying what
never happened, instead of hanging.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

HANG_GUARD_S = 600.0

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], what: str, *, poll_s: float = 0.05, hang_guard_s: float | None = HANG_GUARD_S
) -> T:
    """Call `condition` until it returns something true, and return that. hang_guard_s None: no cap of its own, for a
    condition that includes the end of what is waited on (a process that ends by itself)."""
    give_up = time.monotonic() + (hang_guard_s if hang_guard_s is not None else float("inf"))
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > give_up:
            raise AssertionError(
                f"still waiting for {what} after {hang_guard_s:.0f} s (a hang guard, not a budget: it never happened)"
            )
        time.sleep(poll_s)


def blocked_on_flock(path: Path) -> bool:
    """Whether some process waits to flock() `path` (a "->" line of /proc/locks names the file's inode)."""
    inode = f":{os.stat(path).st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 6 and fields[1] == "->" and fields[2] == "FLOCK" and fields[6].endswith(inode):
            return True
    return False
