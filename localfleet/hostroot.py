"""One test workstation's root: make it this host (name, keys, resolver) and give it the kernel filesystems it needs.

Kernel filesystems, and why each one:
- /proc (fresh proc instance): apt, dpkg, ps and Python itself read it;
- /sys, read-only sysfs: lspci (the preflight's GPU detection) reads PCI devices there; read-only, so nothing in a
  host can change the controller machine's settings;
- /dev as a private tmpfs holding only null, zero, full, random, urandom and tty (what systemd-nspawn and container
  engines give a container), not the controller's /dev bound in: a test can then fake a device (e.g. /dev/kfd) in one
  host without creating it on the controller, and no maintainer script sees the controller's disks;
- /dev/pts, a new devpts instance: sessions that ask for a terminal (`ssh -t`, pyinfra's `_get_pty`);
- /dev/shm, tmpfs: POSIX shared memory and semaphores (Python's multiprocessing, torch).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import stat
from pathlib import Path

from .base import ADMIN_USER
from .commands import run
from .mounts import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, mount
from .release import release_tree

log = logging.getLogger(__name__)

DEVICE_NODES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}
DEVICE_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}


def personalize(root: Path, name: str, client_public_key: str) -> str:
    """Give a fresh host root (an overlay of the base) its identity; returns its SSH host public key line
    ("ssh-ed25519 AAAA… root@NAME")."""
    (root / "etc/hostname").write_text(f"{name}\n")
    # sudo looks the host name up on every call and complains when it does not resolve.
    (root / "etc/hosts").write_text(
        f"127.0.0.1\tlocalhost\n127.0.1.1\t{name}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    )
    (root / "etc/machine-id").write_text(secrets.token_hex(16) + "\n")
    resolv = root / "etc/resolv.conf"
    resolv.unlink(missing_ok=True)
    if os.path.exists("/etc/resolv.conf"):  # apt inside the host uses the controller's network and resolver
        shutil.copyfile("/etc/resolv.conf", resolv)

    host_key = root / "etc/ssh/ssh_host_ed25519_key"
    for old in (host_key, host_key.with_suffix(".pub")):
        old.unlink(missing_ok=True)
    run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", host_key],
        f"generating the SSH host key of {name}",
        fix="apt-get install openssh-client",
    )
    host_public_key = host_key.with_name(host_key.name + ".pub").read_text().strip()

    uid, gid, home = _account(root, ADMIN_USER)
    for home_dir, owner in ((root / "root", (0, 0)), (root / home.lstrip("/"), (uid, gid))):
        ssh_dir = home_dir / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        keys = ssh_dir / "authorized_keys"
        keys.write_text(client_public_key.strip() + "\n")
        keys.chmod(0o600)
        for path in (ssh_dir, keys):
            os.chown(path, *owner)
    return host_public_key


def _account(root: Path, user: str) -> tuple[int, int, str]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3]), fields[5]
    raise LookupError(
        f"no account {user!r} in {root}/etc/passwd — the base root is incomplete: delete {root.parent} and retry"
    )


def mount_kernel_filesystems(root: Path) -> None:
    """Mount /proc, /sys, /dev, /dev/pts, /dev/shm in `root`; on any failure, unmounts what it mounted, then raises."""
    try:
        mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        mount("sysfs", root / "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        dev = root / "dev"
        mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
        for node, (major, minor) in DEVICE_NODES.items():
            os.mknod(dev / node, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(dev / node, 0o666)  # mknod's mode is filtered by the umask
        for link, target in DEVICE_LINKS.items():
            os.symlink(target, dev / link)
        for sub in ("pts", "shm"):
            (dev / sub).mkdir()
        mount("devpts", dev / "pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
        os.chmod(dev / "shm", 0o1777)
        mount("tmpfs", dev / "shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    except BaseException:
        release_tree(root)
        raise
