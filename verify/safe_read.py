"""Opening a file of the analysed system: regular files only, never blocking, bounded reads, under a time limit.

Every file on a workstation is hostile input: the verifier runs as root (the apt hook after every dpkg run), and a
user who owns the venv can put anything where a library is expected. A FIFO there would block a plain open() for
ever, a device node can have side effects when opened, and a sparse file can claim a terabyte. So every read of a
host file in verify/ goes through `open_regular` (or `read_bytes` / `read_text` on top of it):

- the path is first opened with O_PATH, which opens nothing (no FIFO wait, no device driver's open), and fstat()ed:
  anything but a regular file is refused with `NotRegularFile` (an OSError, so callers treating an unreadable file
  as a finding keep doing so);
- only then is that same inode opened for reading, through /proc/self/fd (no window to swap the file: it is the
  inode just checked), with O_NONBLOCK and O_NOCTTY; without /proc (a bare chroot) the path is opened again with
  O_NONBLOCK and the result must be the same regular file;
- `follow=False` adds O_NOFOLLOW, for paths already resolved inside an image (`--root`: following a link there would
  leave the image) and for our own state files;
- `read_bytes`/`read_text` refuse a file larger than the caller's limit (`FileTooLarge`, also an OSError) instead of
  reading it; the ELF reader reads a few ranges and bounds each itself (verify/ld/elf.py);
- `time_limit(seconds)` sets a deadline for everything opened or listed inside it (the static part of a check): past
  it, `OutOfTime` is raised — not an OSError, so it reaches the caller that set the limit and becomes a finding there.
  The deadline is checked before each file operation: it stops a flood of work, it cannot interrupt one system call
  that hangs in the kernel (a dead network filesystem); the apt hook's SIGALRM limit stays the last resort for that.

Standard library only (this runs on the workstation, from the installed verifier).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import time
from contextvars import ContextVar

# No typing or contextlib: the status task's program on every host (roles/status/facts.py) is this module and
# kept_files.py, and importing those two took about 8 of its 30 ms there.

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (a named pipe: opening it would block)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link (not followed here)"),
)
NOT_REGULAR = "not a regular file"  # in every NotRegularFile message

_deadline: ContextVar[tuple[float, float] | None] = ContextVar("verify_safe_read_deadline", default=None)


class NotRegularFile(OSError):
    """The path is not a regular file (a FIFO, a device, a directory …); strerror says which, in words."""

    def __init__(self, path: str, mode: int):
        self.kind = kind_of(mode)
        errno_value = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        super().__init__(errno_value, f"{self.kind}, {NOT_REGULAR}", path)


class FileTooLarge(OSError):
    def __init__(self, path: str, size: int, limit: int):
        super().__init__(errno.EFBIG, f"{size} bytes, more than the {_amount(limit)} any real one has", path)


class OutOfTime(Exception):
    """The time limit of the current `time_limit` block has passed; `seconds` is that limit, `doing` what was next."""

    def __init__(self, seconds: float, doing: str):
        super().__init__(f"not finished within {seconds:g} s (stopped before {doing})")
        self.seconds = seconds
        self.doing = doing


def kind_of(mode: int) -> str:
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else f"an unknown file type ({stat.S_IFMT(mode):#o})"


class time_limit:  # noqa: N801 - used as a function: `with time_limit(5):`
    """Every `check_time` (and so every open and listing here) inside raises OutOfTime once `seconds` have passed.
    None: no limit. Nested limits: the inner one applies inside it."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self._tokens: list = []

    def __enter__(self) -> None:
        limit = None if self.seconds is None else (time.monotonic() + self.seconds, self.seconds)
        self._tokens.append(_deadline.set(limit))

    def __exit__(self, *exc_info) -> None:
        _deadline.reset(self._tokens.pop())


def check_time(doing: str) -> None:
    limit = _deadline.get()
    if limit is not None and time.monotonic() >= limit[0]:
        raise OutOfTime(limit[1], doing)


def open_regular(path: str | os.PathLike, *, follow: bool = True) -> io.FileIO:
    """`path` opened for unbuffered binary reading, if it is a regular file; see the module docstring."""
    path = os.fspath(path)
    check_time(f"reading {path}")
    nofollow = 0 if follow else os.O_NOFOLLOW
    handle = os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow)
    try:
        checked = os.fstat(handle)
        if not stat.S_ISREG(checked.st_mode):
            raise NotRegularFile(path, checked.st_mode)
        read_flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
        try:
            fd = os.open(f"/proc/self/fd/{handle}", read_flags)
        except FileNotFoundError:  # no /proc here: open the path again; the fstat below catches a swapped file
            fd = os.open(path, read_flags | nofollow)
    finally:
        os.close(handle)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotRegularFile(path, opened.st_mode)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise OSError(errno.ESTALE, "replaced while it was being opened", path)
        return open(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, limit: int, *, follow: bool = True) -> bytes:
    """The whole file, if it is a regular file of at most `limit` bytes (FileTooLarge otherwise)."""
    with open_regular(path, follow=follow) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > limit:
            raise FileTooLarge(os.fspath(path), size, limit)
        data = stream.read(limit + 1)  # files in /proc say size 0: read up to the limit and look
        if len(data) > limit:
            raise FileTooLarge(os.fspath(path), len(data), limit)
        return data


def read_text(
    path: str | os.PathLike, limit: int, *, encoding: str = "utf-8", errors: str = "strict", follow: bool = True
) -> str:
    return read_bytes(path, limit, follow=follow).decode(encoding, errors)


def listdir(path: str | os.PathLike) -> list[str]:
    """os.listdir under the time limit (listing never opens the entries, so a FIFO in it is harmless)."""
    check_time(f"listing {os.fspath(path)}")
    return os.listdir(path)


def _amount(limit: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"
