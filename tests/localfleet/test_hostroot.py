"""localfleet/hostroot.py: a host's identity and its kernel filesystems, on a real host root (an overlay of the
base)."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from localfleet.hostroot import DEVICE_NODES, mount_kernel_filesystems, personalize
from localfleet.release import release_tree

from ..support.fleet_checks import mounts_inside
from .conftest import needs_root

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]


def inside(root, *argv):
    return subprocess.run(["chroot", root, *argv], capture_output=True, text=True)


def test_personalize_gives_the_host_its_name_its_own_host_key_and_the_client_key(host_copy):
    host_key = personalize(host_copy, "ws7", "ssh-ed25519 AAAAclient test\n")
    assert (host_copy / "etc/hostname").read_text() == "ws7\n"
    assert "127.0.1.1\tws7" in (host_copy / "etc/hosts").read_text()
    assert host_key.startswith("ssh-ed25519 ") and host_key.endswith(" root@ws7")
    assert (host_copy / "etc/ssh/ssh_host_ed25519_key.pub").read_text().strip() == host_key
    for home, owner in (("root", "root"), ("home/admin", "admin")):
        keys = host_copy / home / ".ssh/authorized_keys"
        assert keys.read_text() == "ssh-ed25519 AAAAclient test\n"
        assert stat.S_IMODE(keys.stat().st_mode) == 0o600
        assert inside(host_copy, "stat", "-c", "%U", f"/{home}/.ssh/authorized_keys").stdout.strip() == owner
    # A second host from the same base gets a different key.
    assert personalize(host_copy, "ws8", "ssh-ed25519 AAAAclient test\n") != host_key


def test_kernel_filesystems_are_private_and_released_cleanly(host_copy):
    mount_kernel_filesystems(host_copy)
    try:
        points = {p.removeprefix(str(host_copy)) for p in mounts_inside(host_copy)}
        assert points == {"", "/proc", "/sys", "/dev", "/dev/pts", "/dev/shm"}  # "": the root itself, an overlay
        for name, (major, minor) in DEVICE_NODES.items():
            node = (host_copy / "dev" / name).stat()
            assert stat.S_ISCHR(node.st_mode) and os.major(node.st_rdev) == major and os.minor(node.st_rdev) == minor
            assert stat.S_IMODE(node.st_mode) == 0o666
        assert inside(host_copy, "sh", "-c", "echo x > /dev/null && head -c 4 /dev/urandom | wc -c").stdout == "4\n"
        assert (
            inside(host_copy, "python3", "-c", "import multiprocessing as m; m.Lock(); print('shm ok')").stdout
            == "shm ok\n"
        )
        assert inside(host_copy, "ps", "-p", "1").returncode == 0  # /proc works
        assert inside(host_copy, "lspci").returncode == 0  # /sys is there for PCI detection
        assert inside(host_copy, "touch", "/sys/kernel/x").returncode != 0  # … read-only
        # A device faked inside a host (e.g. /dev/kfd for a GPU test) stays in that host.
        (host_copy / "dev/kfd").touch()
        assert not Path("/dev/kfd").exists() or Path("/dev/kfd").is_char_device()
        assert (
            inside(host_copy, "python3", "-c", "import os, pty; os.close(pty.openpty()[0]); print('pty ok')").stdout
            == "pty ok\n"
        )
    finally:
        release_tree(host_copy)
    assert mounts_inside(host_copy) == []
