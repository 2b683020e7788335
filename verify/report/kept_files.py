"""The results a workstation keeps under /var/lib/rocm-fleet, as files: where each one is, reading them as hostile
input, and replacing one without a reader ever seeing half of it.

    /var/lib/rocm-fleet/last-verify.json         the last report of `verify check` (the verification stage's run)
    /var/lib/rocm-fleet/apt-hook/last.json       the apt hook's last result (verify/report/hook_state.py)
    /var/lib/rocm-fleet/boot-check/last.json     the boot-time check's last result, where a host has one

`read_kept_files(root)` reads each of them the same way: the path is opened with O_NOFOLLOW (a symlink planted in
its place is reported, not followed), only a regular file is read (a FIFO or a device is never opened for reading,
so it cannot block), at most READ_LIMIT bytes. It returns plain data — contents as text, or one line saying why there
are none — and parses nothing: the typed readers (verify/report/kept.py, `Report.from_json`) judge the contents.

This module imports only the standard library and nothing of the verifier, because it also runs alone: the status
task (roles/status) sends its source to a host as `python3 -I -S -c SOURCE`, so reading a host's state needs no
upload and works whatever verifier version the host has. Run so, `main()` prints one JSON document.

`replace_file(directory, name, text)` writes under a private, unpredictable name in the same directory (created
O_EXCL and O_NOFOLLOW relative to the directory, which is itself opened O_NOFOLLOW) and renames it over `name`: a
reader sees the old file or the new one, and an account that can write in the directory cannot point the write
elsewhere with a symlink.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import sys
import time

STATE_ROOT = "/var/lib/rocm-fleet"
# source → path under the state root. The sources' names are what the status summary and the metrics call them.
KEPT = {
    "verification": "last-verify.json",
    "apt_hook": "apt-hook/last.json",
    "boot_check": "boot-check/last.json",
}
VERIFY_REPORT = KEPT["verification"]
READ_LIMIT = 4 * 1024 * 1024  # a full report, strays' evidence included, is about 15 kB


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str, limit: int = READ_LIMIT) -> tuple[bytes, os.stat_result]:
    """At most `limit` bytes of the regular file at `path`, and its stat. OSError (with a one-line message) for a
    symlink, anything not a regular file, or a file larger than `limit`."""
    try:
        # O_PATH opens nothing for reading: a FIFO is not waited on. O_NOFOLLOW: a symlink is looked at, not followed.
        probe = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise OSError(error.errno, f"{path}: {error.strerror}") from None
    try:
        info = os.fstat(probe)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is {_kind(info.st_mode)}, not a regular file: not read")
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"{path} is {info.st_size} bytes, more than the {limit} read: not read")
        # The same inode, through the O_PATH descriptor: a file swapped for a FIFO meanwhile is not opened.
        fd = os.open(f"/proc/self/fd/{probe}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    finally:
        os.close(probe)
    try:
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"{path} grew past the {limit} bytes read: not read")
    return data, info


def read_kept_files(root: str = STATE_ROOT, limit: int = READ_LIMIT) -> dict:
    """{"now": host time, "files": {source: {"path", "text", "mtime"} | {"path", "missing": True} | {"path", "error"}}}
    for every source in KEPT. Never raises for a file: what cannot be read is an "error" line."""
    files = {}
    for source, relative in KEPT.items():
        path = os.path.join(root, relative)
        try:
            data, info = read_regular(path, limit)
            files[source] = {"path": path, "text": data.decode("utf-8", "replace"), "mtime": info.st_mtime}
        except FileNotFoundError:
            files[source] = {"path": path, "missing": True}
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                files[source] = {"path": path, "missing": True}
            else:
                files[source] = {"path": path, "error": str(error.strerror or error)}
    return {"now": time.time(), "files": files}


def replace_file(directory: str, name: str, text: str, mode: int = 0o644) -> str:
    """Replace directory/name with `text` in one step (see the module's docstring); returns its path."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        partial = f".{name}.{secrets.token_hex(8)}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fchmod(out.fileno(), mode)  # readable by others (node_exporter) only once it is whole
            os.rename(partial, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(partial, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)
    return os.path.join(directory, name)


def main() -> int:
    json.dump(read_kept_files(sys.argv[1] if len(sys.argv) > 1 else STATE_ROOT), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
