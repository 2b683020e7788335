"""verify/debian/kernels.py: kernel packages as dpkg lists them on real systems — `dpkg-query -W -f='${Package}\\t
${Version}\\t${db:Status-Abbrev}\\t${Depends}\\n' 'linux-*'` lines. Debian 12's relations are the archive's own
(apt-cache show on the build machine: linux-image-amd64 6.1.192-3 Depends linux-image-6.1.0-57-amd64 (= 6.1.192-3));
Ubuntu noble's are written in the same shape from its packages (linux-image-generic depends on the image and
modules-extra, linux-image-virtual on the image only) — no Ubuntu archive is reachable from here."""

from __future__ import annotations

import pytest

from verify.debian.kernels import (
    installed_kernels,
    is_meta_package,
    kernel_of,
    meta_packages,
    newest,
    parse_dpkg_query_lines,
)

NOBLE_GENERIC = [
    "linux-generic\t6.8.0-51.52\tii \tlinux-image-generic (= 6.8.0-51.52), linux-headers-generic (= 6.8.0-51.52)",
    "linux-image-generic\t6.8.0-51.52\tii \tlinux-image-6.8.0-51-generic, linux-modules-extra-6.8.0-51-generic, "
    "linux-firmware, intel-microcode, amd64-microcode",
    "linux-headers-generic\t6.8.0-51.52\tii \tlinux-headers-6.8.0-51-generic",
    "linux-image-6.8.0-49-generic\t6.8.0-49.49\tii \tlinux-modules-6.8.0-49-generic",
    "linux-modules-6.8.0-49-generic\t6.8.0-49.49\tii \t",
    "linux-modules-extra-6.8.0-49-generic\t6.8.0-49.49\tii \tlinux-modules-6.8.0-49-generic",
    "linux-headers-6.8.0-49-generic\t6.8.0-49.49\tii \tlinux-headers-6.8.0-49",
    "linux-headers-6.8.0-49\t6.8.0-49.49\tii \t",
    "linux-image-6.8.0-51-generic\t6.8.0-51.52\tii \tlinux-modules-6.8.0-51-generic",
    "linux-modules-6.8.0-51-generic\t6.8.0-51.52\tii \t",
    "linux-modules-extra-6.8.0-51-generic\t6.8.0-51.52\tii \tlinux-modules-6.8.0-51-generic",
    "linux-headers-6.8.0-51-generic\t6.8.0-51.52\tii \tlinux-headers-6.8.0-51",
    "linux-image-6.8.0-45-generic\t6.8.0-45.45\trc \t",  # removed, config files left: not installed
    "linux-firmware\t20240318.git3b128b60-0ubuntu2.6\tii \t",
    "linux-libc-dev\t6.8.0-51.52\tii \t",
]
NOBLE_VIRTUAL = [
    "linux-virtual\t6.8.0-51.52\tii \tlinux-image-virtual (= 6.8.0-51.52), linux-headers-virtual (= 6.8.0-51.52)",
    "linux-image-virtual\t6.8.0-51.52\tii \tlinux-image-6.8.0-51-generic",
    "linux-headers-virtual\t6.8.0-51.52\tii \tlinux-headers-6.8.0-51-generic",
    "linux-image-6.8.0-51-generic\t6.8.0-51.52\tii \tlinux-modules-6.8.0-51-generic",
    "linux-modules-6.8.0-51-generic\t6.8.0-51.52\tii \t",
    "linux-headers-6.8.0-51-generic\t6.8.0-51.52\tii \t",
]
BOOKWORM = [
    "linux-image-amd64\t6.1.192-3\tii \tlinux-image-6.1.0-57-amd64 (= 6.1.192-3)",
    "linux-image-6.1.0-57-amd64\t6.1.192-3\tii \tkmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | "
    "linux-initramfs-tool",
    "linux-image-6.1.0-50-amd64-unsigned\t6.1.176-1\tii \tkmod, linux-base (>= 4.3~)",
    "linux-image-6.1.0-57-amd64-dbg\t6.1.192-3\tii \t",
    "linux-headers-amd64\t6.1.192-3\tii \tlinux-headers-6.1.0-57-amd64 (= 6.1.192-3)",
    "linux-headers-6.1.0-57-amd64\t6.1.192-3\tii \tlinux-headers-6.1.0-57-common (= 6.1.192-3), linux-kbuild-6.1",
]


@pytest.mark.parametrize(
    "name, parsed",
    [
        ("linux-image-6.8.0-51-generic", ("image", "6.8.0-51-generic")),
        ("linux-image-unsigned-6.8.0-51-generic", ("image", "6.8.0-51-generic")),
        ("linux-modules-extra-6.8.0-51-generic", ("modules_extra", "6.8.0-51-generic")),
        ("linux-headers-6.1.0-57-amd64", ("headers", "6.1.0-57-amd64")),
        ("linux-image-6.1.0-50-amd64-unsigned", ("image", "6.1.0-50-amd64")),
        ("linux-image-6.1.0-57-amd64-dbg", None),
        ("linux-image-generic", None),
        ("linux-image-generic-hwe-22.04", None),
    ],
)
def test_package_names(name, parsed):
    assert kernel_of(name) == parsed


def test_meta_package_names():
    assert all(
        map(
            is_meta_package,
            ("linux-generic", "linux-image-generic-hwe-22.04", "linux-image-amd64", "linux-virtual", "linux-oem-24.04"),
        )
    )
    assert not any(
        map(
            is_meta_package,
            (
                "linux-image-6.8.0-51-generic",
                "linux-firmware",
                "linux-libc-dev",
                "linux-headers-generic",
                "linux-headers-amd64",
            ),
        )
    )


def test_ubuntu_generic_kernels_and_their_meta_package():
    packages = parse_dpkg_query_lines(NOBLE_GENERIC)
    kernels = installed_kernels(packages)
    assert sorted(kernels) == ["6.8.0-49-generic", "6.8.0-51-generic"]  # 6.8.0-45: config files only
    assert kernels["6.8.0-51-generic"].modules_extra == "linux-modules-extra-6.8.0-51-generic"
    meta = meta_packages(packages)
    assert meta.installed == ("linux-generic",) and meta.pulling_modules_extra == ("linux-generic",)
    assert meta.statement() == "linux-generic brings linux-modules-extra with every new kernel"
    assert newest(kernels) == "6.8.0-51-generic"


def test_ubuntus_virtual_flavour_says_plainly_that_future_kernels_have_no_amdgpu():
    meta = meta_packages(parse_dpkg_query_lines(NOBLE_VIRTUAL))
    assert meta.split_modules and meta.pulling_modules_extra == ()
    assert meta.statement() == (
        "linux-virtual does not bring linux-modules-extra: the kernels it brings have no amdgpu.ko — install "
        "linux-generic (or the HWE meta package linux-generic-hwe-<release>)"
    )


def test_debian_images_carry_every_module():
    packages = parse_dpkg_query_lines(BOOKWORM)
    assert sorted(installed_kernels(packages)) == ["6.1.0-50-amd64", "6.1.0-57-amd64"]
    meta = meta_packages(packages)
    assert not meta.split_modules and meta.installed == ("linux-image-amd64",)
    assert meta.statement().startswith("every kernel image carries all its modules")


def test_kernel_release_order_is_a_version_order():
    assert newest(["6.8.0-9-generic", "6.8.0-51-generic", "6.8.0-49-generic"]) == "6.8.0-51-generic"
    assert newest(["6.1.0-9-amd64", "6.1.0-28-amd64", "6.11.0-1-amd64"]) == "6.11.0-1-amd64"
    assert newest([]) is None
