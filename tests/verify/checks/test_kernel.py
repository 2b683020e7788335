"""verify/system/kernel.py and the checks kernel.driver, kernel.next_boot, kernel.packages of verify/checks/kernel.py,
on image trees laid out as Ubuntu noble and Debian 12 lay them out (/boot/vmlinuz-<release>,
/lib/modules/<release>/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst, dpkg's linux-* records). The running system's
state (/proc/cmdline, /sys/module/amdgpu, /dev/kfd) is read from files the test makes: there is no amdgpu here
(MOCK of a running AMD GPU host, for that part only; /dev/null stands in for /dev/kfd as a character device)."""

from __future__ import annotations

from pathlib import Path

from tests.verify.debian.test_kernels import NOBLE_GENERIC
from verify.checks.kernel import check_driver, check_next_boot, check_packages, next_boot_line
from verify.debian.kernels import parse_dpkg_query_lines
from verify.ld.fsview import FileSystemView
from verify.report.report import FAIL, PASS, SKIP, WARN
from verify.system.kernel import LivePaths, read_kernel_state

AMDGPU = "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst"


def _image(tmp_path: Path, kernels: dict[str, bool]) -> Path:
    """An image with these kernels (release → amdgpu.ko present)."""
    root = tmp_path / "image"
    for release, has_amdgpu in kernels.items():
        (root / "boot").mkdir(parents=True, exist_ok=True)
        (root / "boot" / f"vmlinuz-{release}").write_bytes(b"stand-in kernel image")
        modules = root / "lib/modules" / release
        (modules / "kernel").mkdir(parents=True, exist_ok=True)
        if has_amdgpu:
            (modules / AMDGPU).parent.mkdir(parents=True, exist_ok=True)
            (modules / AMDGPU).write_bytes(b"stand-in module")
    return root


def _live(
    tmp_path: Path, *, loaded: bool, kfd: bool, cmdline: str = "BOOT_IMAGE=/vmlinuz ro quiet splash"
) -> LivePaths:
    (tmp_path / "cmdline").write_text(cmdline + "\n")
    module = tmp_path / "sys-module-amdgpu"
    if loaded:
        module.mkdir(exist_ok=True)
    return LivePaths(cmdline=str(tmp_path / "cmdline"), module=str(module), kfd="/dev/null" if kfd else "/nonexistent")


def _state(tmp_path, kernels, running, *, loaded=True, kfd=True, cmdline="ro quiet", packages=None):
    root = _image(tmp_path, kernels)
    return read_kernel_state(
        FileSystemView(str(root)), packages, running, _live(tmp_path, loaded=loaded, kfd=kfd, cmdline=cmdline)
    )


def test_a_healthy_host_passes_all_three(tmp_path):
    found = _state(
        tmp_path,
        {"6.8.0-49-generic": True, "6.8.0-51-generic": True},
        "6.8.0-51-generic",
        packages=parse_dpkg_query_lines(NOBLE_GENERIC),
    )
    assert check_driver(found, True).status == PASS
    assert check_driver(found, True).reason == (
        f"6.8.0-51-generic: amdgpu loaded (/lib/modules/6.8.0-51-generic/{AMDGPU}), /dev/kfd present"
    )
    assert check_next_boot(found).status == PASS
    packages = check_packages(found)
    assert packages.status == PASS and packages.reason == (
        "headers and modules-extra for 6.8.0-51-generic installed; linux-generic brings linux-modules-extra with "
        "every new kernel"
    )


def test_an_upgrade_installed_a_kernel_without_amdgpu_the_next_boot_loses_the_gpu(tmp_path):
    packages = parse_dpkg_query_lines([line for line in NOBLE_GENERIC if "modules-extra-6.8.0-51" not in line])
    found = _state(
        tmp_path, {"6.8.0-49-generic": True, "6.8.0-51-generic": False}, "6.8.0-49-generic", packages=packages
    )
    assert found.next_boot == "6.8.0-51-generic" and found.reboot_pending
    result = check_next_boot(found)
    assert result.status == WARN
    assert result.reason == (
        "after the next reboot the GPU is gone: 6.8.0-51-generic (the newest installed kernel, which boots next) has "
        "no amdgpu.ko (linux-modules-extra-6.8.0-51-generic is not installed: apt-get install "
        "linux-modules-extra-6.8.0-51-generic) — apt-get install linux-modules-extra-6.8.0-51-generic before rebooting"
    )
    assert result.evidence["without_amdgpu"] == ["6.8.0-51-generic"]
    assert check_driver(found, True).status == PASS  # the running one is still fine


def test_a_pending_reboot_into_a_good_kernel_is_one_warning_naming_it(tmp_path):
    root = _image(tmp_path, {"6.8.0-49-generic": True, "6.8.0-51-generic": True})
    (root / "run").mkdir()
    (root / "run/reboot-required").write_text("*** System restart required ***\n")
    (root / "run/reboot-required.pkgs").write_text("linux-image-6.8.0-51-generic\nlinux-base\n")
    found = read_kernel_state(
        FileSystemView(str(root)), None, "6.8.0-49-generic", _live(tmp_path, loaded=True, kfd=True)
    )
    assert next_boot_line(found) == (
        "reboot pending (/run/reboot-required (linux-image-6.8.0-51-generic, linux-base); 6.8.0-49-generic runs, "
        f"6.8.0-51-generic is the newest installed): the next boot runs 6.8.0-51-generic — amdgpu.ko present "
        f"(/lib/modules/6.8.0-51-generic/{AMDGPU})"
    )
    assert check_next_boot(found).status == WARN


def test_the_running_kernel_without_driver_fails_only_where_a_gpu_is_required(tmp_path):
    found = _state(tmp_path, {"6.8.0-51-generic": False}, "6.8.0-51-generic", loaded=False, kfd=False)
    result = check_driver(found, True)
    assert result.status == FAIL
    assert result.reason.startswith(
        "the running kernel 6.8.0-51-generic has no amdgpu.ko — apt-get install "
        "linux-modules-extra-6.8.0-51-generic (Ubuntu) or boot a kernel with amdgpu"
    )
    assert "amdgpu is not loaded" in result.reason and "/dev/kfd is missing" in result.reason
    assert check_driver(found, False).status == SKIP


def test_a_blacklist_is_named_with_its_file_and_the_initramfs_fix(tmp_path):
    root = _image(tmp_path, {"6.8.0-51-generic": True})
    (root / "etc/modprobe.d").mkdir(parents=True)
    (root / "etc/modprobe.d/blacklist-amdgpu.conf").write_text("blacklist amdgpu\n")
    found = read_kernel_state(
        FileSystemView(str(root)),
        None,
        "6.8.0-51-generic",
        _live(tmp_path, loaded=False, kfd=False, cmdline="ro quiet amdgpu.modeset=0"),
    )
    result = check_driver(found, True)
    assert result.status == FAIL
    assert result.reason.startswith(
        "amdgpu is kept from loading by 'blacklist amdgpu' in "
        "/etc/modprobe.d/blacklist-amdgpu.conf:1; 'amdgpu.modeset=0' in /proc/cmdline — "
        "remove it (then update-initramfs -u and reboot; AMD's install FAQ)"
    )


def test_a_chroot_without_kernels_skips_what_it_cannot_know(tmp_path):
    found = _state(tmp_path, {}, "6.1.0-28-amd64", loaded=False, kfd=False)
    assert check_next_boot(found).status == SKIP and not found.reboot_pending
    assert check_packages(found).status == SKIP


def test_a_kernel_with_amdgpu_built_in_counts(tmp_path):
    """A custom kernel (CONFIG_DRM_AMDGPU=y) has no amdgpu.ko file: modules.builtin lists it."""
    root = _image(tmp_path, {"6.12.0-custom": False})
    (root / "lib/modules/6.12.0-custom/modules.builtin").write_text(
        "kernel/drivers/gpu/drm/drm.ko\nkernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko\n"
    )
    found = read_kernel_state(FileSystemView(str(root)), None, "6.12.0-custom", _live(tmp_path, loaded=True, kfd=True))
    assert (
        found.kernel("6.12.0-custom").amdgpu_module
        == "/lib/modules/6.12.0-custom/modules.builtin (built into the kernel)"
    )
    assert check_driver(found, True).status == PASS
