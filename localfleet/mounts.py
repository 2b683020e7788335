"""Mount and unmount with the kernel's own calls, and read what is mounted from /proc/self/mountinfo.

mount(2)/umount2(2) are called through ctypes rather than util-linux's `mount`, so that errors come back as an errno we
can act on (EBUSY → kill what holds it and retry; EINVAL → not mounted any more) instead of as text to parse.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_SHARED = 1 << 20
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo (only the fields localfleet uses)."""

    mount_id: int
    mount_point: str
    fstype: str
    source: str
    options: str = ""  # the filesystem's own options ("rw,name=systemd" for systemd's cgroup v1 hierarchy)


def _unescape(field: str) -> str:
    # The kernel writes space, tab, newline and backslash in paths as \040, \011, \012, \134.
    return re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse the text of /proc/PID/mountinfo, in the kernel's order (a parent before the mounts on top of it)."""
    mounts = []
    for line in text.splitlines():
        if not line.strip():
            continue
        left, _, right = line.partition(" - ")
        fields = left.split()
        fstype, source, options = (right.split() + ["", "", ""])[:3]
        mounts.append(Mount(int(fields[0]), _unescape(fields[4]), fstype, _unescape(source), options))
    return mounts


def current_mounts() -> list[Mount]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def mounts_under(directory: Path) -> list[Mount]:
    """Mounts at `directory` or below it, deepest (and, on the same point, most recent) first: the unmount order."""
    top = os.path.realpath(directory)
    inside = [m for m in current_mounts() if m.mount_point == top or m.mount_point.startswith(top.rstrip("/") + "/")]
    order = {m.mount_id: i for i, m in enumerate(inside)}
    return sorted(inside, key=lambda m: (m.mount_point.count("/"), order[m.mount_id]), reverse=True)


def mount(source: str, target: Path, fstype: str, flags: int = 0, options: str = "") -> None:
    if _libc.mount(source.encode(), os.fsencode(target), fstype.encode(), flags, options.encode() or None) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount -t {fstype} {source} {target} ({options or 'no options'}): {os.strerror(code)}")


def make_shared(target: Path) -> None:
    """Make the mount at `target` a shared one: what is mounted below it later also appears in the mount namespaces
    that copied it (a booted host's container, whose copy is a slave: nothing mounted in there comes back)."""
    mount("none", target, "none", MS_SHARED)


def mount_overlay(target: Path, lower: Path, upper: Path, work: Path) -> OSError | None:
    """Mount an overlay of `lower` (read-only) and `upper` (its writes) at `target`; None when mounted, else why not —
    for callers that copy instead: the kernel refuses an upper layer on a filesystem that cannot hold one (overlayfs
    itself, e.g. a container's root; some network filesystems), and a path with the options' separators in it."""
    paths = (str(lower), str(upper), str(work))
    if any(c in path for path in paths for c in ",:\\"):
        return OSError(errno.EINVAL, f"a path has one of the overlay options' separators (, : \\) in it: {paths}")
    try:
        mount("overlay", target, "overlay", 0, f"lowerdir={lower},upperdir={upper},workdir={work}")
    except OSError as error:
        return error
    return None


def umount(target: str, lazy: bool = False) -> bool:
    """Unmount `target`; False when it was not mounted (any more). Raises OSError for anything else (EBUSY…)."""
    if _libc.umount2(os.fsencode(target), MNT_DETACH if lazy else 0) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOENT):
        return False
    raise OSError(code, f"umount {target}: {os.strerror(code)}")
