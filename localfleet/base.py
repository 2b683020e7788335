"""The Debian 12 (bookworm) root every test workstation starts from: built once with debootstrap, cached, shared.

The cache key is a hash of the recipe below (suite, mirror, package list, and RECIPE_VERSION for the configuration
steps), so changing any of them builds a new base next to the old one, and the old one is deleted once no fleet uses
it. Hosts are overlays on it (overlay_base): it is never written after it is built.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .commands import last_line, run, run_child
from .errors import FleetError
from .layout import Layout
from .mounts import MS_NODEV, MS_NOEXEC, MS_NOSUID, mount, mount_overlay
from .release import release_tree, remove_tree
from .state import load_state

log = logging.getLogger(__name__)

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What a real workstation (and the deploy) needs beyond minbase, and why:
INCLUDE = (
    "python3",  # the installed verifier runs with the host's own python3 (3.11, matching the torch cp311 wheel)
    "python3-venv",  # the venv stage (`python3 -m venv` with ensurepip)
    "openssh-server",  # how pyinfra reaches the host (brings openssh-sftp-server for uploads)
    "sudo",  # real fleets log in as an admin user with sudo: the `admin` account below
    "pciutils",  # lspci, for the preflight's PCI display-device (GPU) detection; reads /sys, mounted read-only
    "ca-certificates",  # the trust store every real workstation has (https apt sources, pip, curl)
    "procps",  # ps/pgrep/pkill, used by pyinfra facts and by tests looking into a host
    "rsync",  # syncing a wheelhouse to the hosts (rsync must exist on both ends)
    "systemd-sysv",  # systemd as PID 1 when a host boots (localfleet/container.py); real workstations run it
    "dbus",  # the system bus, which systemd's own services (logind, hostnamed …) and systemctl's users expect
)
# Bump when configure() below changes, so cached bases built by the old steps are replaced.
RECIPE_VERSION = 2
ADMIN_USER = "admin"
STAMP = ".localfleet-base.json"

APT_SOURCES = f"""\
deb {MIRROR} {SUITE} main
deb {MIRROR} {SUITE}-updates main
deb http://deb.debian.org/debian-security {SUITE}-security main
"""
# Maintainer scripts call invoke-rc.d / deb-systemd-invoke, which ask this script first: 101 = "action forbidden".
# A package installed in a test host therefore never starts a daemon on the controller machine.
POLICY_RC_D = """\
#!/bin/sh
# localfleet test workstation: never start services from maintainer scripts (this root shares the controller's kernel).
exit 101
"""
# What systemd would start in a booted host that a test workstation must not run, and why. Masked (linked to
# /dev/null): never started, whatever wants them. Their services stay usable where a test starts one itself
# (`systemctl start apt-daily-upgrade.service`).
MASKED_UNITS = {
    # Timers that start work on their own, mid-test: apt and unattended-upgrades taking the dpkg lock, dpkg's own
    # database backup, file system checks and trims, /tmp cleaning.
    "apt-daily.timer": "apt-get update and downloads, on its own",
    "apt-daily-upgrade.timer": "unattended-upgrades, on its own",
    "dpkg-db-backup.timer": "a dpkg database backup at midnight",
    "e2scrub_all.timer": "ext4 metadata checks of LVM volumes",
    "fstrim.timer": "TRIM of the file systems, which are the controller's",
    "systemd-tmpfiles-clean.timer": "deletes old files in /tmp and /var/tmp, where tests keep theirs",
    "e2scrub_reap.service": "an LVM scan at every boot: the host has no disks of its own",
    # Login prompts on the console nobody reads (its output goes to the host's console log).
    "console-getty.service": "a login prompt on the console",
    "getty@.service": "login prompts on virtual terminals",
    # The host shares the controller's network namespace: whatever configures links, addresses, routes, DNS or the
    # clock would configure the controller's. Most are not installed; masked so that a test's apt-get cannot bring one.
    "systemd-networkd.service": "network configuration",
    "systemd-networkd.socket": "network configuration",
    "systemd-networkd-wait-online.service": "waits for networkd",
    "systemd-resolved.service": "DNS",
    "systemd-timesyncd.service": "the clock",
    "networking.service": "ifupdown",
    "NetworkManager.service": "network configuration",
    # The controller's devices and kernel settings: nspawn's read-only /sys and /proc/sys already stop these.
    "systemd-udevd.service": "device events",
    "systemd-udev-trigger.service": "replays the controller's device events",
    "systemd-sysctl.service": "kernel settings; net.* ones would be the controller's",
    "sys-fs-fuse-connections.mount": "the FUSE control file system, which can abort the controller's FUSE mounts",
}
SSHD_DROP_IN = """\
# localfleet test workstation: key login only, one host key (generated for each host when the fleet comes up).
# Port and ListenAddress are given on sshd's command line (a free loopback port per host).
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""


@dataclass(frozen=True)
class Recipe:
    suite: str = SUITE
    mirror: str = MIRROR
    variant: str = "minbase"
    include: tuple[str, ...] = INCLUDE
    version: int = RECIPE_VERSION

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dir_name(self) -> str:
        return f"{self.suite}-{self.key}"


# The environment of commands run inside a root: none of the controller's own (its PATH, a venv, its locale).
CHROOT_ENV = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
    "HOME": "/root",
}


def _chroot(root: Path, *argv: str, doing: str) -> None:
    run(["chroot", root, *argv], doing, env=CHROOT_ENV)


def configure(root: Path) -> None:
    """Turn a fresh debootstrap root into the workstation template (nothing host-specific: that happens per host)."""
    (root / "usr/sbin/policy-rc.d").write_text(POLICY_RC_D)
    (root / "usr/sbin/policy-rc.d").chmod(0o755)
    (root / "etc/apt/sources.list").write_text(APT_SOURCES)
    (root / "etc/ssh/sshd_config.d/localfleet.conf").write_text(SSHD_DROP_IN)
    # Every host gets its own host key at `up`; a key baked into the template would be shared by all of them.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    mask_units(root)
    (root / "etc/localfleet").write_text(
        "This is a localfleet test workstation (a chroot, or a container booted by systemd-nspawn, on the controller "
        "machine), not a real host.\n"
    )
    _chroot(
        root,
        "useradd",
        "--create-home",
        "--shell",
        "/bin/bash",
        "--groups",
        "sudo",
        ADMIN_USER,
        doing=f"creating the {ADMIN_USER} account in {root}",
    )
    sudoers = root / "etc/sudoers.d/localfleet-admin"
    sudoers.write_text(f"{ADMIN_USER} ALL=(ALL:ALL) NOPASSWD: ALL\n")
    sudoers.chmod(0o440)
    # Package lists, as a workstation has them; apt-get needs /proc for some of its work.
    mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    try:
        _chroot(root, "apt-get", "update", "-q", doing=f"apt-get update in {root} (is deb.debian.org reachable?)")
        _chroot(root, "apt-get", "clean", doing=f"apt-get clean in {root}")
    finally:
        release_tree(root)


def mask_units(root: Path) -> None:
    """Mask MASKED_UNITS in `root` as `systemctl mask` does (a link to /dev/null in /etc/systemd/system)."""
    for unit in MASKED_UNITS:
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")


def ensure_base(layout: Layout, recipe: Recipe = Recipe()) -> Path:
    """The cached base root for `recipe`, built first if needed (~1 min; other processes wait on a file lock)."""
    layout.bases.mkdir(parents=True, exist_ok=True)
    target = layout.bases / recipe.dir_name
    with open(layout.bases / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / STAMP).is_file():
            return target
        _build(layout, recipe, target)
        _prune_unused_bases(layout, keep=target)
    return target


def _build(layout: Layout, recipe: Recipe, target: Path) -> None:
    if shutil.which("debootstrap") is None:
        raise FleetError(
            "debootstrap is not installed on the controller — apt-get install debootstrap (bin/bootstrap does)"
        )
    for stale in layout.bases.glob(".build-*"):  # a build interrupted by a killed process
        log.info("removing interrupted base build %s", stale)
        remove_tree(stale, inside=layout.cache)
    if target.exists():  # no stamp: an incomplete copy, never trusted
        remove_tree(target, inside=layout.cache)
    building = layout.bases / f".build-{recipe.key}-{os.getpid()}"
    layout.debs.mkdir(parents=True, exist_ok=True)
    build_log = layout.bases / f"{recipe.dir_name}.log"
    log.info("building the %s base root with debootstrap (about a minute; log: %s)", recipe.suite, build_log)
    started = time.monotonic()
    try:
        with open(build_log, "w") as out:
            # Never outlives this call: a debootstrap still writing into the build would defeat its removal below.
            done = run_child(
                [
                    "debootstrap",
                    f"--variant={recipe.variant}",
                    f"--include={','.join(recipe.include)}",
                    "--components=main",
                    f"--cache-dir={layout.debs}",
                    recipe.suite,
                    str(building),
                    recipe.mirror,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0:
            raise FleetError(
                f"debootstrap {recipe.suite} from {recipe.mirror} failed (exit {done.returncode}): "
                f"{last_line(build_log.read_text())} — see {build_log}; check that the mirror is reachable"
            )
        configure(building)
        (building / STAMP).write_text(json.dumps(asdict(recipe), indent=2) + "\n")
        building.rename(target)
    except BaseException:
        remove_tree(building, inside=layout.cache)
        raise
    log.info("base root %s built in %.0f s", target, time.monotonic() - started)


def overlay_base(layout: Layout, base: Path, dest: Path) -> None:
    """Make `dest` a host root that starts as the base: an overlay mount, the base its read-only lower layer and a
    writable layer of its own beside it (`layers(dest)`: `<dest>-upper`, `<dest>-work`). No copy of the ~290 MB root
    is made (a copy took 1-12 s of disk time per host, depending on the machine's load), and a teardown deletes only
    what the host changed.

    Writes never reach the base: a file written in place, chmod-ed or replaced is first copied up into the host's own
    layer (what a hard-linked tree would not do), so no host sees another's changes. release_tree unmounts it with
    the host's other mounts. A base stays while a fleet uses it (_prune_unused_bases). Where the cache's filesystem
    cannot hold an overlay's writable layer (overlayfs itself, some network filesystems), the base is copied instead.
    """
    dest.mkdir()
    with open(layout.bases / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # a rebuild (exclusive) never prunes a base while a host is made from it
        overlay_or_copy(base, dest, *layers(dest))


def overlay_or_copy(lower: Path, target: Path, upper: Path, work: Path) -> bool:
    """Make the empty directory `target` start as `lower`: an overlay mount whose writes land in `upper` (`work`: the
    kernel's scratch directory beside it), both made here — or, where the kernel cannot mount one (see
    mounts.mount_overlay), a copy, with `upper` and `work` removed again (callers tell the two apart by whether
    `upper` exists). True when mounted. Used for host roots (overlay_base) and for the venv tests lend to hosts."""
    for directory in (upper, work):
        directory.mkdir(parents=True)
    # An overlay's top directory is its upper layer's, and a copy's is `target`: both as `lower` has it (owner and
    # mode; not as the umask left them — a chroot's / of 0700 shuts its accounts out).
    info = lower.stat()
    for directory in (upper, target):
        os.chown(directory, info.st_uid, info.st_gid)
        directory.chmod(info.st_mode & 0o7777)
    failure = mount_overlay(target, lower, upper, work)
    if failure is None:
        return True
    log.warning("cannot mount an overlay of %s at %s (%s): copying it instead", lower, target, failure)
    for directory in (upper, work):  # (a mount that failed late may have left its work/work)
        shutil.rmtree(directory)
    run(
        ["cp", "-a", "--reflink=auto", f"{lower}/.", target],
        f"copying {lower} to {target}",
        fix=f"check free space with `df -h {target.parent}`",
    )
    return False


def layers(root: Path) -> tuple[Path, Path]:
    """The writable layer of the host root `root` (overlay_base) — everything the host added or changed, as plain
    files; it does not exist where the base was copied instead — and the overlay's work directory."""
    return root.with_name(f"{root.name}-upper"), root.with_name(f"{root.name}-work")


def own_layer(root: Path) -> Path:
    """The host root's writable layer (layers)."""
    return layers(root)[0]


def _prune_unused_bases(layout: Layout, keep: Path) -> None:
    # Called with the exclusive lock held. Hosts are overlays on their base: one that a fleet still names in its state
    # (running, kept by `localfleet up`, or not yet swept after a killed run) stays, and goes at a later rebuild.
    used = {state.base for state in map(load_state, layout.fleets.glob("*/")) if state is not None}
    for base in layout.bases.iterdir():
        if base.is_dir() and base != keep and (base / STAMP).is_file() and str(base) not in used:
            log.info("removing base root %s (built by an older recipe)", base)
            remove_tree(base, inside=layout.cache)
