"""Preflight, the pure part: parse what the facts read from a host, and decide whether the host is fit (no I/O).

Does not check: the GPU's architecture (the verification stage reports it), network reach to the repositories (the
download itself says so), or that the kernel driver is loaded beyond /dev/kfd existing.
"""

from __future__ import annotations

from dataclasses import dataclass

from roles import pins
from roles.debian.os_support import OsRelease, support_for

AMD_PCI_VENDOR = "0x1002"
# PCI base classes of AMD GPUs: 0x03 display controller (Radeon: 0x0300 VGA; Instinct MI100-MI250: 0x0380) and 0x12
# processing accelerator (Instinct MI300X lists as 0x1200).
GPU_CLASS_PREFIXES = ("0x03", "0x12")
GB = 10**9


@dataclass(frozen=True)
class PciDevice:
    slot: str  # 0000:03:00.0
    vendor: str  # 0x1002
    device: str  # 0x744c
    pci_class: str  # 0x030000


@dataclass(frozen=True)
class GpuInventory:
    kfd: bool  # /dev/kfd exists: the amdgpu kernel driver offers the compute interface ROCm uses
    devices: tuple[PciDevice, ...]  # every PCI device the host lists

    @property
    def amd_gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices
                     if d.vendor.lower() == AMD_PCI_VENDOR and d.pci_class.lower().startswith(GPU_CLASS_PREFIXES))


def parse_gpu_inventory(lines: list[str]) -> GpuInventory:
    """Lines `kfd yes|no` and `pci SLOT VENDOR CLASS DEVICE` (see roles/preflight/facts.py)."""
    kfd = False
    devices = []
    for line in lines:
        words = line.split()
        if words[:1] == ["kfd"] and len(words) == 2:
            kfd = words[1] == "yes"
        elif words[:1] == ["pci"] and len(words) >= 4:
            devices.append(PciDevice(slot=words[1], vendor=words[2], pci_class=words[3],
                                     device=words[4] if len(words) > 4 else "?"))
    return GpuInventory(kfd=kfd, devices=tuple(devices))


@dataclass(frozen=True)
class FreeSpace:
    path: str  # the path asked about (it may not exist yet)
    mount_point: str  # the filesystem it will land on
    available_bytes: int


def parse_free_space(lines: list[str]) -> tuple[FreeSpace, ...]:
    """Lines `PATH <one line of df -Pk>`: PATH FILESYSTEM 1024-BLOCKS USED AVAILABLE CAPACITY MOUNTED-ON."""
    found = []
    for line in lines:
        words = line.split()
        if len(words) < 7 or not words[4].isdigit():
            continue
        found.append(FreeSpace(path=words[0], mount_point=" ".join(words[6:]), available_bytes=int(words[4]) * 1024))
    return tuple(found)


def parse_existing_users(lines: list[str]) -> frozenset[str]:
    """`getent passwd NAME…` lines: the names that exist."""
    return frozenset(line.split(":", 1)[0] for line in lines if ":" in line)


@dataclass(frozen=True)
class DiskNeed:
    path: str
    gb: int
    what: str


def disk_needs(min_free_disk_gb: int, rocm_pending: bool, venv_path: str) -> tuple[DiskNeed, ...]:
    """What each path needs. min_free_disk_gb covers ROCm and the venv; once ROCm is there, only the venv's share."""
    venv_gb = min(pins.VENV_DISK_GB, min_free_disk_gb)
    needs = [DiskNeed(venv_path, venv_gb, "the venv")]
    if rocm_pending:
        needs.insert(0, DiskNeed("/opt", min_free_disk_gb - venv_gb, "ROCm"))
    return tuple(needs)


@dataclass(frozen=True)
class PreflightInput:
    """Everything preflight looks at for one host (facts already parsed, settings already validated)."""

    os_release: OsRelease
    rocm_install: str
    rocm_pending: bool  # the wanted ROCm release is not installed yet
    rocm_release: str
    gpu_required: bool
    gpus: GpuInventory | None  # None when not read (gpu_required False)
    needs: tuple[DiskNeed, ...]
    free: tuple[FreeSpace, ...]
    required_users: tuple[str, ...]
    existing_users: frozenset[str]


@dataclass(frozen=True)
class PreflightVerdict:
    problems: tuple[str, ...]  # each: what is wrong; what to do
    summary: str  # one line describing the host when fit

    @property
    def fit(self) -> bool:
        return not self.problems


def check(facts: PreflightInput) -> PreflightVerdict:
    problems: list[str] = []
    support = support_for(facts.os_release)
    if not support.supported:
        problems.append(f"{support.note}: provision a supported OS")
    elif facts.rocm_install == "install" and support.installer_codename is None:
        problems.append(f"{facts.os_release.label}: {support.note}")

    gpu_text = "no GPU required"
    if facts.gpu_required and facts.gpus is not None:
        amd = facts.gpus.amd_gpus
        if not amd:
            problems.append("no AMD GPU found (no PCI display or accelerator device of vendor 0x1002): install one, or set "
                            "gpu_required: False for a host without a GPU")
        elif not facts.gpus.kfd:
            problems.append(f"AMD GPU {amd[0].slot} found but /dev/kfd is missing (the amdgpu kernel driver is not "
                            "loaded): boot a kernel with amdgpu (Ubuntu's inbox driver is enough with --no-dkms)")
        gpu_text = f"{len(amd)} AMD GPU(s): " + ", ".join(f"{d.slot} {d.device}" for d in amd)

    by_mount: dict[str, list] = {}
    for need in facts.needs:
        space = next((f for f in facts.free if f.path == need.path), None)
        if space is None:
            problems.append(f"could not read the free space for {need.path} (df): check that df works on the host")
            continue
        by_mount.setdefault(space.mount_point, [space, []])[1].append(need)
    disk_texts = []
    for mount_point, (space, needs) in by_mount.items():
        wanted_gb = sum(n.gb for n in needs)
        free_gb = space.available_bytes / GB
        holds = " and ".join(f"{n.what} ({n.path})" for n in needs)
        disk_texts.append(f"{free_gb:.0f} GB free on {mount_point}")
        if space.available_bytes < wanted_gb * GB:
            problems.append(f"only {free_gb:.1f} GB free on {mount_point}, which will hold {holds}; {wanted_gb} GB "
                            f"needed: free space there, or lower min_free_disk_gb")

    missing = [user for user in facts.required_users if user not in facts.existing_users]
    if missing:
        problems.append(f"user(s) {', '.join(missing)} do not exist (workstation_users / venv_owner): create them, "
                        "or fix the inventory")

    summary = f"{facts.os_release.label}; {gpu_text}; {', '.join(disk_texts) or 'disk not checked'}"
    return PreflightVerdict(problems=tuple(problems), summary=summary)
