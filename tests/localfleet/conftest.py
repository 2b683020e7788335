"""Fixtures for the local fleet's tests. Everything here runs real things: debootstrap, mounts, chroot, sshd."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from localfleet.base import ensure_base, layers, overlay_base
from localfleet.layout import Layout
from localfleet.release import release_tree

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts, chroot and sshd in host roots")


def real_fleet(test):
    """Marks a test that brings real hosts up: root, slow, skipped when not root."""
    return needs_root(pytest.mark.root(pytest.mark.slow(test)))


@pytest.fixture(scope="session")
def base_root():
    """The cached Debian 12 base root (built by the first test that needs it: about a minute)."""
    return ensure_base(Layout.default())


@pytest.fixture
def host_copy(base_root, tmp_path):
    """A private host root in tmp_path (an overlay of the base root, as a fleet's hosts are), released (processes,
    mounts) and deleted after the test, its writable layer with it."""
    root = tmp_path / "root"
    overlay_base(Layout.default(), base_root, root)
    yield root
    release_tree(root)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root), *map(str, layers(root))], check=True)


def chrooted_python(root, code: str) -> subprocess.Popen:
    """The controller's Python, chrooted into `root` after start (no binary in `root` needed): a process rooted
    there."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, signal, sys, time; os.chroot(sys.argv[1]); os.chdir('/'); {code}",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
