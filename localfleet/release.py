"""Release a directory tree that served as one or more roots: stop what runs in it, unmount what is mounted in it,
and (only then) delete it.

Works from the tree alone — /proc/PID/root for processes, /proc/self/mountinfo for mounts — so it cleans up after a
controller that was killed halfway as well as after a normal run.
"""

from __future__ import annotations

import errno
import logging
import shutil
import time
from pathlib import Path

from .errors import FleetError
from .mounts import mounts_under, umount
from .procs import processes_rooted_under, stop_processes_rooted_under

log = logging.getLogger(__name__)


def release_tree(directory: Path, grace_s: float = 3.0) -> None:
    """Leave no process rooted in `directory` and nothing mounted in it, or raise FleetError saying what is left."""
    for attempt in range(3):
        stop_processes_rooted_under(directory, grace_s)
        for mount in mounts_under(directory):
            try:
                umount(mount.mount_point)
            except OSError as error:
                if error.errno != errno.EBUSY:
                    raise FleetError(f"{error.strerror} — check `findmnt -R {directory}`") from None
                log.debug("busy: %s (attempt %d)", mount.mount_point, attempt + 1)
        if not mounts_under(directory):
            break
    else:
        # Something outside the roots (a shell cd'ed into one, a file held open) still uses a mount: detach it so the
        # tree is free now; the kernel finishes unmounting when the last user lets go.
        for mount in mounts_under(directory):
            log.warning("lazy unmount of %s: still busy after stopping every process rooted in it", mount.mount_point)
            umount(mount.mount_point, lazy=True)
    mounts, pids = mounts_under(directory), processes_rooted_under(directory)
    if mounts or pids:
        raise FleetError(
            f"could not release {directory}: still mounted {[m.mount_point for m in mounts]}, "
            f"still running {pids} — stop them by hand, then run `python -m localfleet down` again"
        )


def remove_tree(directory: Path, inside: Path) -> None:
    """release_tree, then delete `directory` — refusing anything outside `inside` or with a mount left in it."""
    directory, inside = directory.resolve(), inside.resolve()
    if inside not in directory.parents:
        raise FleetError(f"refusing to delete {directory}: it is not inside localfleet's directory {inside}")
    if not directory.exists():
        return
    release_tree(directory)
    if mounts_under(directory):  # release_tree raises first; this guards the rmtree below against any future change
        raise FleetError(f"refusing to delete {directory}: something is still mounted in it")
    for attempt in range(3):
        try:
            shutil.rmtree(directory)
            return
        except OSError as error:  # e.g. ENOTEMPTY: something still creates files in the tree
            failure = error
            log.debug("deleting %s failed (%s), attempt %d", directory, error, attempt + 1)
            time.sleep(0.5)
            release_tree(directory)
    raise FleetError(
        f"could not delete {directory}: {failure.strerror} ({failure.filename}) — a process outside the "
        f"fleet may be writing into it: find it with `lsof +D {directory}`, stop it, run `down` again"
    )
