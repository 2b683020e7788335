"""The kernel side of the GPU, read from a system's files: which kernel runs, which are installed and which of them
has the amdgpu module, whether amdgpu is loaded and /dev/kfd there, what keeps amdgpu out, and whether a reboot is
pending — and into which kernel.

With `--no-dkms` ROCm uses the kernel's own amdgpu driver, so every kernel apt installs must carry it: on Ubuntu it is
in linux-modules-extra-<release> (the -virtual/cloud flavours lack it), on Debian in the image package. A kernel
installed now takes effect at the next boot, which is why every *installed* kernel is looked at, not only the running
one. The kernel that boots next is taken to be the newest installed one (GRUB's default entry, GRUB_DEFAULT=0);
/etc/default/grub's GRUB_DEFAULT is recorded when it says otherwise, not interpreted.

Files read (under a root, for images and tests): /lib/modules/<release>/{kernel/drivers/gpu/drm/amd/amdgpu,
updates/dkms,updates,extra}/amdgpu.ko[.zst|.xz|.gz] (or amdgpu in its modules.builtin), /boot/vmlinuz-*,
/run/reboot-required(.pkgs), the modprobe.d files and /proc/cmdline (verify/system/modprobe.py), /sys/module/amdgpu and
/dev/kfd (only for the running system). Nothing is executed, no module is loaded.
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass, field

from verify.debian.kernels import (
    KernelPackage,
    KernelPackages,
    MetaPackages,
    compare_kernels,
    installed_kernels,
    meta_packages,
    newest,
)
from verify.ld.fsview import FileSystemView
from verify.system.modprobe import Block, blocks_in_cmdline, read_modprobe_config
from verify.system.textfiles import list_dir, read_optional

MODULE_DIRS = ("kernel/drivers/gpu/drm/amd/amdgpu", "updates/dkms", "updates", "extra")
MODULE_NAMES = ("amdgpu.ko", "amdgpu.ko.zst", "amdgpu.ko.xz", "amdgpu.ko.gz")
REBOOT_REQUIRED = "/run/reboot-required"


@dataclass(frozen=True)
class InstalledKernel:
    release: str  # as `uname -r` says it: 6.8.0-51-generic
    amdgpu_module: str | None  # /lib/modules/<release>/…/amdgpu.ko* when present
    modules_dir: bool  # /lib/modules/<release> exists
    image: bool  # /boot/vmlinuz-<release> exists
    packages: KernelPackages | None = None  # what dpkg has for it

    @property
    def has_amdgpu(self) -> bool:
        return self.amdgpu_module is not None

    def describe_amdgpu(self) -> str:
        if self.has_amdgpu:
            return f"amdgpu.ko present ({self.amdgpu_module})"
        if not self.modules_dir:
            return f"no /lib/modules/{self.release}: amdgpu.ko missing"
        if self.packages is not None and self.packages.modules and not self.packages.modules_extra:
            return (
                f"amdgpu.ko missing (linux-modules-extra-{self.release} is not installed: apt-get install "
                f"linux-modules-extra-{self.release})"
            )
        return "amdgpu.ko missing"

    def to_json(self) -> dict:
        return {
            "release": self.release,
            "amdgpu_module": self.amdgpu_module,
            "modules_dir": self.modules_dir,
            "image": self.image,
            "packages": None
            if self.packages is None
            else {k: getattr(self.packages, k) for k in ("image", "modules", "modules_extra", "headers")},
        }


@dataclass(frozen=True)
class KernelState:
    running: str | None  # None: not the running system (an image under --root)
    installed: tuple[InstalledKernel, ...]  # oldest first
    amdgpu_loaded: bool | None  # /sys/module/amdgpu (None: not the running system)
    kfd: bool | None  # /dev/kfd is a character device (None: not the running system)
    blocks: tuple[Block, ...]  # what keeps amdgpu from loading (modprobe.d, /proc/cmdline)
    reboot_required: bool  # /run/reboot-required exists
    reboot_packages: tuple[str, ...]  # /run/reboot-required.pkgs
    meta: MetaPackages | None  # None: dpkg's database was not readable
    grub_default: str | None = None  # GRUB_DEFAULT from /etc/default/grub when it is not 0
    unreadable: tuple[str, ...] = field(default=())

    def kernel(self, release: str | None) -> InstalledKernel | None:
        return next((k for k in self.installed if k.release == release), None)

    @property
    def next_boot(self) -> str | None:
        """The kernel the next boot runs: the newest installed one (GRUB's default entry)."""
        return newest(k.release for k in self.installed)

    @property
    def reboot_pending(self) -> bool:
        nxt = self.next_boot
        return self.reboot_required or (self.running is not None and nxt is not None and nxt != self.running)

    def to_json(self) -> dict:
        return {
            "running": self.running,
            "next_boot": self.next_boot,
            "reboot_pending": self.reboot_pending,
            "reboot_required_file": self.reboot_required,
            "reboot_required_packages": list(self.reboot_packages),
            "amdgpu_loaded": self.amdgpu_loaded,
            "dev_kfd": self.kfd,
            "blocks": [b.describe() for b in self.blocks],
            "installed": [k.to_json() for k in self.installed],
            "meta_packages": None
            if self.meta is None
            else {
                "installed": list(self.meta.installed),
                "pulling_modules_extra": list(self.meta.pulling_modules_extra),
                "split_modules": self.meta.split_modules,
                "statement": self.meta.statement(),
            },
            "grub_default": self.grub_default,
            "unreadable": list(self.unreadable),
        }


def amdgpu_module(view: FileSystemView, release: str) -> str | None:
    """Where amdgpu.ko* of kernel `release` is (image path), or None. A kernel built with amdgpu in it (=y, a custom
    build) lists it in modules.builtin instead: that counts, and says so."""
    base = f"/lib/modules/{release}"
    for directory in MODULE_DIRS:
        names = set(list_dir(view.local(f"{base}/{directory}")))
        for name in MODULE_NAMES:
            if name in names:
                return f"{base}/{directory}/{name}"
    builtin, _ = read_optional(view.local(f"{base}/modules.builtin"), 1024 * 1024)
    if builtin and any(line.strip().endswith("/amdgpu.ko") for line in builtin.splitlines()):
        return f"{base}/modules.builtin (built into the kernel)"
    return None


def _grub_default(view: FileSystemView, unreadable: list[str]) -> str | None:
    text, error = read_optional(view.local("/etc/default/grub"))
    if error:
        unreadable.append(error)
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("GRUB_DEFAULT="):
            value = line.split("=", 1)[1].strip().strip("\"'")
            return None if value in ("0", "") else value
    return None


@dataclass(frozen=True)
class LivePaths:
    """Where the running system's state is read (tests point these at files of their own)."""

    cmdline: str = "/proc/cmdline"
    module: str = "/sys/module/amdgpu"
    kfd: str = "/dev/kfd"


def read_kernel_state(
    view: FileSystemView, packages: tuple[KernelPackage, ...] | None, running: str | None, live: LivePaths = LivePaths()
) -> KernelState:
    """The kernel state of the system `view` shows. `packages`: dpkg's linux-* records (None: unreadable database);
    `running`: `uname -r` when `view` is the running system, else None (sysfs, /dev and /proc are not the image's)."""
    unreadable: list[str] = []
    by_dpkg = installed_kernels(packages or ())
    images = {name[len("vmlinuz-") :] for name in list_dir(view.local("/boot")) if name.startswith("vmlinuz-")}
    modules = set(list_dir(view.local("/lib/modules")))
    releases = set(by_dpkg) | images
    installed = tuple(
        InstalledKernel(
            release, amdgpu_module(view, release), release in modules, release in images, by_dpkg.get(release)
        )
        for release in sorted(releases, key=functools.cmp_to_key(compare_kernels))
    )
    blocks, bad = read_modprobe_config(view.image_root or "/")
    unreadable += bad
    amdgpu_loaded = kfd = None
    if running is not None:
        cmdline, error = read_optional(live.cmdline, 64 * 1024)
        if error:
            unreadable.append(error)
        blocks += blocks_in_cmdline(cmdline or "")
        amdgpu_loaded = os.path.isdir(live.module)
        try:
            kfd = stat.S_ISCHR(os.stat(live.kfd).st_mode)
        except OSError:
            kfd = False
    text, error = read_optional(view.local(REBOOT_REQUIRED), 4096)
    reboot_required = text is not None or error is not None
    pkgs, _ = read_optional(view.local(REBOOT_REQUIRED + ".pkgs"), 64 * 1024)
    return KernelState(
        running=running,
        installed=installed,
        amdgpu_loaded=amdgpu_loaded,
        kfd=kfd,
        blocks=tuple(blocks),
        reboot_required=reboot_required,
        reboot_packages=tuple(dict.fromkeys(line.strip() for line in (pkgs or "").splitlines() if line.strip())),
        meta=None if packages is None else meta_packages(packages),
        grub_default=_grub_default(view, unreadable),
        unreadable=tuple(unreadable),
    )
