"""Checks `kernel.driver`, `kernel.next_boot`, `kernel.packages` — the kernel's amdgpu driver now and after the next
boot (ROCm is installed with --no-dkms: the GPU depends on the kernel's own amdgpu module).

- `kernel.driver`: the running kernel has amdgpu.ko, amdgpu is loaded (/sys/module/amdgpu), /dev/kfd exists, nothing
  keeps amdgpu out (modprobe.d, /proc/cmdline). A failure only where a GPU is required (`--no-gpu-required`: skip).
- `kernel.next_boot`: a reboot is pending (/run/reboot-required, or a newer kernel installed than the one running) —
  a warning naming the kernel that boots next and whether it has amdgpu.ko; the next kernel without amdgpu.ko is a
  warning that the GPU will be gone after the reboot. Every installed kernel's amdgpu.ko is in the evidence.
- `kernel.packages`: AMD's prerequisites for the running kernel — linux-headers-<release>, and on Ubuntu
  linux-modules-extra-<release> — and whether the kernel meta package keeps bringing modules-extra (it says so
  plainly when it does not: linux-image-virtual's kernels have no amdgpu.ko).
A system with no installed kernel (a container, a chroot) skips the last two; an image (--root) skips the first.
Reads files only (verify/system/kernel.py). The report's facts also carry the boot-time check's last result
(/var/lib/rocm-fleet/boot-check/last.json, verify/report/boot_state.py): what the last boot found.
"""

from __future__ import annotations

import platform

from verify.checks.host import Host
from verify.debian.kernels import from_dpkg_status
from verify.report.boot_state import DEFAULT_DIR as BOOT_STATE_DIR
from verify.report.boot_state import BootState
from verify.report.hook_state import StateError
from verify.report.report import FAIL, PASS, SKIP, WARN, BootCheckFacts, CheckResult, KernelFacts
from verify.system.kernel import KernelState, read_kernel_state

DRIVER, NEXT_BOOT, PACKAGES = "kernel.driver", "kernel.next_boot", "kernel.packages"
REBUILD_INITRAMFS = "update-initramfs -u"


def state(host: Host) -> KernelState:
    """This run's kernel state (read once; see Host.shared)."""
    return host.shared(_read)


def _read(host: Host) -> KernelState:
    packages = host.packages
    running = platform.release() if host.view.is_host else None
    return read_kernel_state(host.view, None if packages is None else from_dpkg_status(packages), running)


def check_driver(found: KernelState, gpu_required: bool) -> CheckResult:
    title = "the running kernel drives the GPU (amdgpu)"
    evidence = found.to_json()
    if found.running is None:
        return CheckResult(DRIVER, title, SKIP, "not the running system (--root): no kernel runs it", evidence)
    running = found.kernel(found.running)
    problems = []
    if found.blocks:
        where = "; ".join(b.describe() for b in found.blocks)
        problems.append(
            f"amdgpu is kept from loading by {where} — remove it (then {REBUILD_INITRAMFS} and reboot; "
            "AMD's install FAQ)"
        )
    if running is None or not running.has_amdgpu:
        package = f"linux-modules-extra-{found.running}"
        detail = running.describe_amdgpu() if running else f"no /lib/modules/{found.running}: amdgpu.ko missing"
        problems.append(
            f"the running kernel {found.running} has {detail.replace('amdgpu.ko missing', 'no amdgpu.ko')}"
            f" — apt-get install {package} (Ubuntu) or boot a kernel with amdgpu"
        )
    if not found.amdgpu_loaded:
        problems.append("amdgpu is not loaded (no /sys/module/amdgpu) — modprobe amdgpu, or reboot")
    if not found.kfd:
        problems.append("/dev/kfd is missing (the amdgpu driver offers no compute interface) — load amdgpu")
    if not problems:
        return CheckResult(
            DRIVER, title, PASS, f"{found.running}: amdgpu loaded ({running.amdgpu_module}), /dev/kfd present", evidence
        )
    if not gpu_required:
        return CheckResult(
            DRIVER, title, SKIP, f"no GPU required on this host: {problems[0].split(' — ')[0]}", evidence
        )
    also = f" (also: {'; '.join(p.split(' — ')[0] for p in problems[1:])})" if len(problems) > 1 else ""
    return CheckResult(DRIVER, title, FAIL, problems[0] + also, evidence)


def next_boot_line(found: KernelState) -> str | None:
    """'reboot pending: the next boot runs 6.8.0-51-generic — amdgpu.ko present' (None: no reboot pending)."""
    if not found.reboot_pending:
        return None
    nxt = found.kernel(found.next_boot)
    why = []
    if found.reboot_required:
        packages = f" ({', '.join(found.reboot_packages)})" if found.reboot_packages else ""
        why.append(f"/run/reboot-required{packages}")
    if found.running and found.next_boot and found.next_boot != found.running:
        why.append(f"{found.running} runs, {found.next_boot} is the newest installed")
    target = (
        f"the next boot runs {found.next_boot} — {nxt.describe_amdgpu()}"
        if nxt
        else "the kernel of the next boot is not known (no installed kernel found)"
    )
    grub = f" (unless GRUB_DEFAULT={found.grub_default} picks another)" if found.grub_default else ""
    return f"reboot pending ({'; '.join(why)}): {target}{grub}"


def check_next_boot(found: KernelState) -> CheckResult:
    title = "the kernel of the next boot has amdgpu"
    evidence = found.to_json()
    if not found.installed:
        return CheckResult(
            NEXT_BOOT,
            title,
            SKIP,
            "no installed kernel (no /boot/vmlinuz-*, no linux-image package): nothing boots from this "
            "system (a container or a chroot)",
            evidence,
        )
    nxt = found.kernel(found.next_boot)
    without = [k.release for k in found.installed if not k.has_amdgpu]
    evidence["without_amdgpu"] = without
    if nxt is not None and not nxt.has_amdgpu:
        fix = (
            f"apt-get install linux-modules-extra-{nxt.release}"
            if nxt.packages and nxt.packages.modules
            else f"install a kernel with amdgpu, or remove {nxt.release}"
        )
        return CheckResult(
            NEXT_BOOT,
            title,
            WARN,
            f"after the next reboot the GPU is gone: {nxt.release} (the newest installed kernel, which "
            f"boots next) has {nxt.describe_amdgpu().replace('amdgpu.ko missing', 'no amdgpu.ko')} — "
            f"{fix} before rebooting",
            evidence,
        )
    line = next_boot_line(found)
    if line:
        return CheckResult(NEXT_BOOT, title, WARN, f"{line} — reboot to run it", evidence)
    older = f"; without amdgpu.ko: {', '.join(without)}" if without else ""
    return CheckResult(
        NEXT_BOOT,
        title,
        PASS,
        f"no reboot pending; {found.next_boot} boots next, amdgpu.ko present "
        f"({len(found.installed)} kernel(s) installed{older})",
        evidence,
    )


def check_packages(found: KernelState) -> CheckResult:
    title = "kernel packages for the driver (headers, modules-extra, meta package)"
    evidence = found.to_json()
    if found.meta is None:
        return CheckResult(PACKAGES, title, SKIP, "dpkg's database could not be read", evidence)
    running = found.kernel(found.running) if found.running else None
    if running is None or running.packages is None:
        return CheckResult(
            PACKAGES,
            title,
            SKIP,
            f"dpkg has no package of the running kernel {found.running or '(none: an image)'} "
            "(a container, a chroot or a hand-built kernel)",
            evidence,
        )
    missing = []
    if not running.packages.headers:
        missing.append(f"linux-headers-{running.release}")
    if found.meta.split_modules and not running.packages.modules_extra:
        missing.append(f"linux-modules-extra-{running.release}")
    statement = found.meta.statement()
    meta_ok = not found.meta.split_modules or bool(found.meta.pulling_modules_extra)
    if missing:
        return CheckResult(
            PACKAGES,
            title,
            WARN,
            f"{', '.join(missing)} not installed (AMD's prerequisites for the running kernel) — "
            f"apt-get install {' '.join(missing)} (the ROCm stage does); {statement}",
            evidence,
        )
    if not meta_ok:
        return CheckResult(PACKAGES, title, WARN, statement, evidence)
    return CheckResult(
        PACKAGES,
        title,
        PASS,
        f"headers{' and modules-extra' if found.meta.split_modules else ''} "
        f"for {running.release} installed; {statement}",
        evidence,
    )


def run(host: Host) -> list[CheckResult]:
    found = state(host)
    return [check_driver(found, host.options.gpu_required), check_next_boot(found), check_packages(found)]


def facts(host: Host, results: list[CheckResult]) -> dict:
    return {"kernel": _kernel_facts(state(host)), "boot_check": _boot_check(host)}


def _kernel_facts(found: KernelState) -> KernelFacts | None:
    if found.running is None and not found.installed:
        return None
    running, nxt = found.kernel(found.running), found.kernel(found.next_boot)
    return KernelFacts(
        running=found.running,
        next_boot=found.next_boot,
        reboot_pending=found.reboot_pending,
        amdgpu_loaded=found.amdgpu_loaded,
        running_has_amdgpu=running.has_amdgpu if running else (False if found.running else None),
        next_boot_has_amdgpu=nxt.has_amdgpu if nxt else None,
        installed=tuple(k.release for k in found.installed),
        without_amdgpu=tuple(k.release for k in found.installed if not k.has_amdgpu),
    )


def _boot_check(host: Host) -> BootCheckFacts | None:
    """The boot-time check's last result on this host (None: none, or one that cannot be used)."""
    try:
        found = BootState(host.view.local(BOOT_STATE_DIR)).last()
    except StateError:
        return None
    return found.facts() if found else None
