"""A real Debian root as a pyinfra host through the @chroot connector, and pyinfra's own results of a run on it.

    with chroot_host(image_root, tmp_path) as root:        # a writable overlay with /proc, /sys, /dev mounted
        first = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert first.changed_operations ...

The overlay is released (processes stopped, everything unmounted) afterwards, also when the test fails; its upper
layer lies in the test's tmp_path.
Needs root (chroot, mounts).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from localfleet.hostroot import mount_kernel_filesystems
from localfleet.release import release_tree
from tests.support.debian_roots import overlay

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def chroot_host(image_root: Path, workdir: Path):
    """A writable overlay of `image_root` with the kernel filesystems mounted, released (processes stopped, every
    mount undone) when the block ends, however it ends."""
    top = workdir / "host"
    try:
        root = overlay(image_root, top)
        mount_kernel_filesystems(root)  # unmounts what it mounted if it fails halfway
        yield root
    finally:
        release_tree(top)


@dataclass(frozen=True)
class PyinfraRun:
    returncode: int
    results: dict  # pyinfra's --json "results"
    log: str  # what pyinfra printed on stderr (host lines, errors)

    @property
    def changed_operations(self) -> list[str]:
        return [op["name"] for op in self.results.get("operations", []) if op["success"]]

    @property
    def failed_operations(self) -> list[str]:
        return [op["name"] for op in self.results.get("operations", []) if op["error"]]

    def explain(self) -> str:
        return f"exit {self.returncode}; changed {self.changed_operations}; failed {self.failed_operations}\n{self.log}"


def run_pyinfra(root: Path, deploy: str, data: dict, *extra: str) -> PyinfraRun:
    """`pyinfra -y --json @chroot/ROOT DEPLOY --data k=v …` from the repository root."""
    argv = [sys.executable, "-m", "pyinfra", "-y", "--json", f"@chroot/{root}", deploy, *extra]
    for key, value in data.items():
        argv += ["--data", f"{key}={value}"]
    return finished(subprocess.run(argv, capture_output=True, text=True, cwd=REPO))


def finished(done: subprocess.CompletedProcess) -> PyinfraRun:
    """A finished `pyinfra … --json` process read as a PyinfraRun (its stdout's tail goes into the log when it holds
    no results: pyinfra prints none when no host is left active at the end)."""
    try:
        results = (json.loads(done.stdout).get("results") or {}) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        results = {}
    return PyinfraRun(done.returncode, results, done.stderr + done.stdout[-2000:] * (not results))
