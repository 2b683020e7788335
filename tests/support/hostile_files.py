"""Real hostile files where the verifier expects a library or a database file: what a workstation user who owns the
venv (or anyone who can write the analysed image) can put there.

    plant(path, "fifo" | "chardev" | "symlink to /dev/zero" | "socket" | "directory")
    with fifo_readers(path) as opened: …   # opened.count: how often something opened the FIFO to read it

A FIFO blocks whoever opens it for reading until a writer comes. `fifo_readers` is that writer, for tests that must
fail (not hang) on code that still opens one: it waits for a reader to be blocked in open() — a non-blocking open for
writing succeeds exactly when one is — counts it and lets it go with end-of-file. It waits for that condition, not
for a time.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KINDS = ("fifo", "chardev", "symlink to /dev/zero", "socket", "directory")
DEV_ZERO = os.major(os.stat("/dev/zero").st_rdev), os.minor(os.stat("/dev/zero").st_rdev)


def plant(path: Path, kind: str) -> Path:
    """Replace whatever is at `path` with a `kind` (chardev: a node with /dev/zero's numbers — needs root)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(*DEV_ZERO))
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "socket":
        # A socket's path is limited to 107 bytes: bind it in a short directory, then move it into place.
        with tempfile.TemporaryDirectory(dir="/tmp") as short, socket.socket(socket.AF_UNIX) as listener:
            listener.bind(f"{short}/s")
            os.rename(f"{short}/s", path)
    elif kind == "directory":
        path.mkdir()
    else:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    return path


class _Count:
    count = 0


@contextmanager
def fifo_readers(path: Path) -> Iterator[_Count]:
    opened = _Count()
    done = threading.Event()

    def serve():
        while not done.wait(0.005):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:
                if error.errno in (errno.ENXIO, errno.ENOENT):  # no reader blocked on it (yet)
                    continue
                raise
            opened.count += 1
            os.close(fd)  # the reader gets end-of-file and goes on

    if not stat.S_ISFIFO(os.lstat(path).st_mode):
        yield opened
        return
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        done.set()
        thread.join()
