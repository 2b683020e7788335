"""Preflight, the pure part: parse what the facts read from a host, and decide whether the host is fit (no I/O).

Does not check: the GPU's architecture (the verification stage reports it) or network reach to the repositories (the
download itself says so). The kernel side (roles/debian/kernel.py): where a GPU is required, what keeps amdgpu from
loading stops the host, and a running kernel without amdgpu.ko is named in the /dev/kfd line; on every host a pending
reboot (and whether the kernel that boots next has amdgpu.ko) and an APU's integrated GPU beside a discrete one are
warnings — printed, not stops.
"""

from __future__ import annotations

from dataclasses import dataclass

from roles import pins
from roles.debian.kernel import HostKernels
from roles.debian.os_support import OsRelease, support_for
from verify.system.pci_ids import integrated_gpu_name

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
        return tuple(
            d
            for d in self.devices
            if d.vendor.lower() == AMD_PCI_VENDOR and d.pci_class.lower().startswith(GPU_CLASS_PREFIXES)
        )

    @property
    def integrated(self) -> tuple[PciDevice, ...]:
        """AMD GPUs that are an APU's integrated graphics (verify/system/pci_ids.py)."""
        return tuple(d for d in self.amd_gpus if integrated_gpu_name(d.device))

    @property
    def discrete(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.amd_gpus if not integrated_gpu_name(d.device))


def integrated_gpu_warning(gpus: GpuInventory) -> str | None:
    """An iGPU beside a discrete GPU: named, with AMD's advice (None when there is not both)."""
    if not gpus.integrated or not gpus.discrete:
        return None
    igpus = ", ".join(f"{d.slot} {integrated_gpu_name(d.device)}" for d in gpus.integrated)
    dgpus = ", ".join(f"{d.slot} ({d.device})" for d in gpus.discrete)
    return (
        f"integrated GPU {igpus} beside the discrete GPU(s) {dgpus}: the ROCm runtime may crash with the iGPU "
        "enumerated, even with HIP_VISIBLE_DEVICES set (AMD's prerequisites) — disable the integrated GPU in the "
        "BIOS; until then the verification runs NF4 on the discrete GPU(s) only and names the HIP_VISIBLE_DEVICES "
        "value that hides the iGPU"
    )


def parse_gpu_inventory(lines: list[str]) -> GpuInventory:
    """Lines `kfd yes|no` and `pci SLOT VENDOR CLASS DEVICE` (see roles/preflight/facts.py)."""
    kfd = False
    devices = []
    for line in lines:
        words = line.split()
        if words[:1] == ["kfd"] and len(words) == 2:
            kfd = words[1] == "yes"
        elif words[:1] == ["pci"] and len(words) >= 4:
            devices.append(
                PciDevice(
                    slot=words[1], vendor=words[2], pci_class=words[3], device=words[4] if len(words) > 4 else "?"
                )
            )
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
    kernels: HostKernels | None = None  # None when not read


@dataclass(frozen=True)
class PreflightVerdict:
    problems: tuple[str, ...]  # each: what is wrong; what to do
    summary: str  # one line describing the host when fit
    warnings: tuple[str, ...] = ()  # printed on the host's line; the host goes on

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
            problems.append(
                "no AMD GPU found (no PCI display or accelerator device of vendor 0x1002): install one, or set "
                "gpu_required: False for a host without a GPU"
            )
        elif not facts.gpus.kfd:
            kernels = facts.kernels
            running = kernels.running if kernels else ""
            no_module = (
                f"; the running kernel {running} has no amdgpu.ko: apt-get install "
                f"linux-modules-extra-{running}, then modprobe amdgpu"
                if kernels and running and not kernels.has_amdgpu(running)
                else ""
            )
            problems.append(
                f"AMD GPU {amd[0].slot} found but /dev/kfd is missing (the amdgpu kernel driver is not "
                f"loaded): boot a kernel with amdgpu (Ubuntu's inbox driver is enough with --no-dkms)"
                f"{no_module}"
            )
        if facts.kernels and facts.kernels.blocks:
            where = "; ".join(b.describe() for b in facts.kernels.blocks)
            problems.append(
                f"amdgpu is kept from loading by {where}: remove it, then update-initramfs -u and reboot "
                "(AMD's install FAQ)"
            )
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
            problems.append(
                f"only {free_gb:.1f} GB free on {mount_point}, which will hold {holds}; {wanted_gb} GB "
                f"needed: free space there, or lower min_free_disk_gb"
            )

    missing = [user for user in facts.required_users if user not in facts.existing_users]
    if missing:
        problems.append(
            f"user(s) {', '.join(missing)} do not exist (workstation_users / venv_owner): create them, "
            "or fix the inventory"
        )

    summary = f"{facts.os_release.label}; {gpu_text}; {', '.join(disk_texts) or 'disk not checked'}"
    return PreflightVerdict(problems=tuple(problems), summary=summary, warnings=tuple(_warnings(facts)))


def reboot_warning(kernels: HostKernels) -> str | None:
    """'reboot pending: the next boot runs 6.8.0-51-generic, which has no amdgpu.ko — …' (None: none pending)."""
    if not kernels.reboot_pending or kernels.next_boot is None:
        return None
    nxt = kernels.next_boot
    if kernels.has_amdgpu(nxt):
        return f"reboot pending: the next boot runs {nxt} (amdgpu.ko present; {kernels.running} runs now)"
    return (
        f"reboot pending: the next boot runs {nxt}, which has no amdgpu.ko — the GPU is gone after that reboot: "
        f"apt-get install linux-modules-extra-{nxt} first (the ROCm stage does where apt has it)"
    )


def _warnings(facts: PreflightInput) -> list[str]:
    found = []
    if facts.kernels is not None and (line := reboot_warning(facts.kernels)):
        found.append(line)
    if facts.gpus is not None and (line := integrated_gpu_warning(facts.gpus)):
        found.append(line)
    return found
