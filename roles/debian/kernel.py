"""The kernel side of a host as the KernelDriver fact reads it (pure): the running kernel, every installed kernel
and whether it has amdgpu.ko, amdgpu loaded and /dev/kfd, what keeps amdgpu out, a pending reboot, dpkg's kernel
packages and which headers/modules-extra packages apt has for the kernels that matter (and Debian's
firmware-amd-graphics) — asked only about those dpkg has not installed, the only ones whose answer decides anything.

The parsing of what is read — modprobe.d lines, the kernel command line, dpkg's kernel and meta packages — is the
verifier's own (verify.debian.kernels, verify.system.modprobe), so preflight, the ROCm stage and the verification's
kernel.* checks judge alike.

Fact output, one item per line:
    running 6.8.0-51-generic
    modules 6.8.0-51-generic /lib/modules/6.8.0-51-generic/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst
    modules 6.8.0-52-generic                       (no amdgpu.ko*)
    image 6.8.0-51-generic                         (/boot/vmlinuz-<release>)
    loaded yes|no        kfd yes|no        reboot-required yes|no
    cmdline BOOT_IMAGE=/vmlinuz-6.8.0-51-generic root=UUID=… ro quiet splash
    modprobe /etc/modprobe.d/blacklist-amdgpu.conf:1:blacklist amdgpu
    pkg linux-image-6.8.0-51-generic<TAB>6.8.0-51.52<TAB>ii <TAB>linux-modules-6.8.0-51-generic
    available linux-modules-extra-6.8.0-51-generic   (apt has a candidate; only names dpkg has not installed)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verify.debian.kernels import KernelPackage, installed_kernels, meta_packages, newest, parse_dpkg_query_lines
from verify.system.modprobe import Block, blocks_in_cmdline, blocks_in_modprobe_conf

FIRMWARE_PACKAGE = "firmware-amd-graphics"  # Debian's amdgpu firmware (non-free-firmware); Ubuntu: in linux-firmware


@dataclass(frozen=True)
class HostKernels:
    running: str
    amdgpu: dict[str, str | None]  # release (a /lib/modules directory) → its amdgpu.ko*, None when it has none
    images: frozenset[str]  # releases with /boot/vmlinuz-<release>
    loaded: bool
    kfd: bool
    reboot_required: bool
    blocks: tuple[Block, ...]
    packages: tuple[KernelPackage, ...]
    # Package names apt can install, among those dpkg has not installed (apt is not asked about the others).
    available: frozenset[str] = field(default_factory=frozenset)

    @property
    def installed(self) -> tuple[str, ...]:
        """Kernels that can boot: an image in /boot or an installed linux-image package."""
        return tuple(sorted(set(self.images) | set(installed_kernels(self.packages))))

    @property
    def next_boot(self) -> str | None:
        return newest(self.installed)

    @property
    def reboot_pending(self) -> bool:
        return self.reboot_required or (self.next_boot is not None and self.next_boot != self.running)

    def has_amdgpu(self, release: str | None) -> bool:
        return bool(release) and self.amdgpu.get(release) is not None

    @property
    def split_modules(self) -> bool:
        return meta_packages(self.packages).split_modules

    def meta_statement(self) -> str:
        return meta_packages(self.packages).statement()

    def driver_packages_wanted(self) -> tuple[str, ...]:
        """AMD's prerequisites for the running kernel and for the one that boots next: linux-headers-<release> and
        (where the distribution splits modules, Ubuntu) linux-modules-extra-<release> — those apt knows and dpkg has
        not installed."""
        installed = {p.name for p in self.packages if p.installed}
        wanted = []
        for release in dict.fromkeys(r for r in (self.running, self.next_boot) if r):
            for name in (f"linux-headers-{release}", f"linux-modules-extra-{release}"):
                if name in self.available and name not in installed:
                    wanted.append(name)
        # Debian ships amdgpu in every kernel image but its firmware (the GPU's microcode) in non-free-firmware's
        # firmware-amd-graphics: without it amdgpu does not bring the GPU up. Ubuntu's linux-firmware carries it, and
        # apt there knows no such package, so it is wanted only where apt has it.
        if FIRMWARE_PACKAGE in self.available and FIRMWARE_PACKAGE not in installed:
            wanted.append(FIRMWARE_PACKAGE)
        return tuple(wanted)


def parse_host_kernels(lines: list[str]) -> HostKernels:
    running = ""
    amdgpu: dict[str, str | None] = {}
    images: set[str] = set()
    flags: dict[str, bool] = {}
    blocks: list[Block] = []
    package_lines: list[str] = []
    available: set[str] = set()
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "running":
            running = rest.strip()
        elif key == "modules":
            release, _, module = rest.strip().partition(" ")
            if release:
                amdgpu[release] = module.strip() or None
        elif key == "image" and rest.strip():
            images.add(rest.strip())
        elif key in ("loaded", "kfd", "reboot-required"):
            flags[key] = rest.strip() == "yes"
        elif key == "cmdline":
            blocks += blocks_in_cmdline(rest)
        elif key == "modprobe":
            where, _, text = rest.partition(":")
            number, _, text = text.partition(":")
            blocks += [Block(f"{where}:{number}", b.text) for b in blocks_in_modprobe_conf(text, where)]
        elif key == "pkg":
            package_lines.append(rest)
        elif key == "available" and rest.strip():
            available.add(rest.strip())
    return HostKernels(
        running,
        amdgpu,
        frozenset(images),
        flags.get("loaded", False),
        flags.get("kfd", False),
        flags.get("reboot-required", False),
        tuple(blocks),
        parse_dpkg_query_lines(package_lines),
        frozenset(available),
    )
