"""What dpkg changed lately, from the tail of its log (/var/log/dpkg.log): read on the host by `verify kept`, so that
the status task can say "packages changed since …" when a host's newest result is older than the last change.

dpkg logs one line per action, in the host's local time:

    2026-12-05 02:00:01 install librocm-smi64-1:amd64 <none> 5.2.3-2
    2026-12-05 02:00:01 upgrade libfoo:amd64 1.0 2.0
    2026-12-05 02:10:44 remove librocm-smi64-1:amd64 5.2.3-2 <none>
    2026-12-05 02:10:44 purge librocm-smi64-1:amd64 5.2.3-2 <none>

(and status, configure, trigproc, conffile and startup lines, which add or take away no package version: left out).
The times are turned into Unix time here, on the host, in its own time zone — as dpkg wrote them. Only the last
`TAIL` bytes are read (a regular file, never blocking: verify/safe_read.py), and at most MAX_CHANGES lines kept;
`complete` says whether the tail held the whole file. /var/lib/dpkg/status's modification time comes with it, for a
host whose log cannot be read (rotated away, removed): it moves with every change, and with selections too. Plain
data out; the controller reads it as hostile input (verify/report/kept.py).
"""

from __future__ import annotations

import os
import time

from verify.safe_read import open_regular

LOG = "/var/log/dpkg.log"
STATUS = "/var/lib/dpkg/status"
# The actions that add or take away a package version (what the controller reads back: verify/report/kept.py).
CHANGES = ("install", "upgrade", "remove", "purge")
TAIL = 64 * 1024  # a few hundred lines: a month of a workstation's upgrades is some 100 kB
MAX_CHANGES = 200


def _tail(path: str, size: int) -> tuple[bytes, bool]:
    """The last `size` bytes of a regular file, from the start of a line; and whether that is the whole file."""
    with open_regular(path) as stream:
        length = os.fstat(stream.fileno()).st_size
        start = max(0, length - size)
        stream.seek(start)
        data = b""
        while len(data) < length - start:
            chunk = stream.read(length - start - len(data))
            if not chunk:
                break
            data += chunk
    if start > 0:
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    return data, start == 0


def parse(text: str) -> list[list]:
    """[[unix time, action, package, old version or None, new version or None], …] of the change lines, in order."""
    changes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or fields[2] not in CHANGES:
            continue
        try:
            stamp = time.mktime(time.strptime(f"{fields[0]} {fields[1]}", "%Y-%m-%d %H:%M:%S"))
        except (ValueError, OverflowError):
            continue
        old, new = (None if version == "<none>" else version for version in fields[4:6])
        changes.append([stamp, fields[2], fields[3], old, new])
    return changes


def recent_changes(log: str = LOG, status: str = STATUS, tail: int = TAIL) -> dict:
    """{"status_mtime": float | None, "changes": [...] (oldest first), "complete": bool} — or, instead of the changes,
    "error": why the log could not be read. Never raises."""
    found: dict = {"status_mtime": None}
    try:
        found["status_mtime"] = os.stat(status).st_mtime
    except OSError:
        pass
    try:
        data, complete = _tail(log, tail)
    except OSError as error:
        found["error"] = f"{log}: {error.strerror or error}"
        return found
    found["changes"] = parse(data.decode("utf-8", "replace"))[-MAX_CHANGES:]
    found["complete"] = complete
    return found
