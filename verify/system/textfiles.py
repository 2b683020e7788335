"""Reading a host's small configuration files as hostile input: regular files only, never blocking, bounded.

`read_text(path, limit)` looks at what `path` is before opening it (O_PATH + fstat: a FIFO, a device or a socket is
never opened, so a planted FIFO at /etc/environment cannot hang a root process), then opens that same inode
O_NONBLOCK and reads at most `limit` bytes; a longer file raises FileTooLarge instead of being read whole. Errors are
OSErrors whose message names the path and what it is, so a caller can turn them into one line of a report.

The shape follows the project's safe-open helper on the security branch (`verify/safe_read.py`: `read_text(path,
limit)`); once that lands, this module becomes an import of it.
"""

from __future__ import annotations

import errno
import os
import stat

CONFIG_LIMIT = 256 * 1024  # /etc/environment, a profile.d script, a modprobe.d file, a list file: a few KB each


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a directory: never opened."""


class FileTooLarge(OSError):
    """The file is larger than any real one of its kind: not read."""


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | os.PathLike, limit: int = CONFIG_LIMIT) -> bytes:
    """At most `limit` bytes of the regular file at `path` (symlinks followed); OSError otherwise."""
    path = os.fspath(path)
    probe = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        info = os.fstat(probe)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"{path} is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise FileTooLarge(errno.EFBIG, f"{path} is {info.st_size} bytes, more than the {limit} read here")
        # The same inode, opened through the O_PATH descriptor: a file swapped for a FIFO meanwhile is not opened.
        fd = os.open(f"/proc/self/fd/{probe}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    finally:
        os.close(probe)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, f"{path} changed into something that is not a regular file")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileTooLarge(errno.EFBIG, f"{path} grew beyond the {limit} bytes read here")
    return data


def read_text(path: str | os.PathLike, limit: int = CONFIG_LIMIT) -> str:
    """`read_bytes` decoded as UTF-8 (undecodable bytes replaced: a comment in Latin-1 is no reason to stop)."""
    return read_bytes(path, limit).decode("utf-8", errors="replace")


def read_optional(path: str | os.PathLike, limit: int = CONFIG_LIMIT) -> tuple[str | None, str | None]:
    """(text, None), (None, None) when the file does not exist, or (None, one line) when it cannot be used."""
    try:
        return read_text(path, limit), None
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except OSError as error:
        return None, str(error) if isinstance(error, (NotRegularFile, FileTooLarge)) else f"{path}: {error.strerror}"


def list_dir(path: str | os.PathLike) -> list[str]:
    """The names in a directory, sorted; [] when it does not exist or is not a directory."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
