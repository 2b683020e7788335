"""The results a workstation keeps under /var/lib/rocm-fleet, as files: where each one is, reading them as hostile
input, and replacing one without a reader ever seeing half of it.

    /var/lib/rocm-fleet/last-verify.json         the last report of `verify check` (the verification stage's run)
    /var/lib/rocm-fleet/apt-hook/last.json       the apt hook's last result (verify/report/hook_state.py)
    /var/lib/rocm-fleet/boot-check/last.json     the boot-time check's last result, where a host has one

`read_kept_files(root)` reads each of them through verify/safe_read.py (regular files only, never blocking, at most
READ_LIMIT bytes) without following a symlink planted in its place, and says the host's name and time. It returns
plain data — contents as text, or one line saying why there are none — and parses nothing: the typed readers
(verify/report/kept.py, `Report.from_json`, `judge_report`) judge the contents.

The status task asks a host for them through the installed verifier (`verify kept`, verify/commands/kept.py), which
prints this as one JSON document.

`replace_file(directory, name, text)` writes under a private, unpredictable name in the same directory (created
O_EXCL and O_NOFOLLOW relative to the directory, which is itself opened O_NOFOLLOW) and renames it over `name`: a
reader sees the old file or the new one, and an account that can write in the directory cannot point the write
elsewhere with a symlink.
"""

from __future__ import annotations

import errno
import os
import secrets
import time

from verify.safe_read import read_bytes

STATE_ROOT = "/var/lib/rocm-fleet"
# The one place the layout is written down: the apt hook's and the boot check's state directories
# (hook_state.DEFAULT_DIR, boot_state.DEFAULT_DIR) and the name of their last result are made from these.
APT_HOOK_DIR = "apt-hook"
BOOT_CHECK_DIR = "boot-check"
LAST = "last.json"
# source → path under the state root. The sources' names are what the status summary and the metrics call them.
KEPT = {
    "verification": "last-verify.json",
    "apt_hook": f"{APT_HOOK_DIR}/{LAST}",
    "boot_check": f"{BOOT_CHECK_DIR}/{LAST}",
}
VERIFY_REPORT = KEPT["verification"]
READ_LIMIT = 4 * 1024 * 1024  # a full report, strays' evidence included, is about 15 kB


def read_kept_files(root: str = STATE_ROOT, limit: int = READ_LIMIT) -> dict:
    """{"hostname", "now", "files": {source: {"path", "text"} | {"path", "missing": True} | {"path", "error"}}} for
    every source in KEPT. Never raises for a file: what cannot be read is an "error" line."""
    files = {}
    for source, relative in KEPT.items():
        path = os.path.join(root, relative)
        try:
            files[source] = {"path": path, "text": read_bytes(path, limit, follow=False).decode("utf-8", "replace")}
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                files[source] = {"path": path, "missing": True}
            else:  # safe_read's words: "a symbolic link (not followed here), not a regular file", "a FIFO …"
                files[source] = {"path": path, "error": f"{path}: {error.strerror or error}"}
    return {"hostname": os.uname().nodename, "now": time.time(), "files": files}


def replace_file(directory: str, name: str, text: str, mode: int = 0o644) -> str:
    """Replace directory/name with `text` in one step (see the module's docstring); returns its path."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        partial = f".{name}.{secrets.token_hex(8)}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
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
