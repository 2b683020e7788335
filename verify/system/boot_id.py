"""The running boot's id (/proc/sys/kernel/random/boot_id, a new random one at every boot).

Results keep the id of the boot they ran in (the report's host.boot_id; the boot check's result its own boot_id), so
that a reader can tell a result of an earlier boot from one of the running boot: the runtime, NF4 and the kernel's
driver are a boot's, and a reboot the boot check did not follow leaves them unproven (roles/status/model.py).
"""

from __future__ import annotations

from verify.system.textfiles import read_optional

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id(path: str = BOOT_ID) -> str | None:
    """The running boot's id, or None where there is none to read (no /proc: an image, a bare chroot)."""
    text, _ = read_optional(path, 256)
    return (text or "").strip() or None
