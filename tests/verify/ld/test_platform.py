"""verify/ld/platform.py: glibc's CPU rules on pinned flag sets, and this machine's answer against `ld.so --help` and
`LD_DEBUG=libs` (whatever CPU the test runs on: nothing here hard-codes this machine's levels)."""

from __future__ import annotations

import re
import subprocess

import pytest

from verify.ld.platform import (
    RPM_SYSTEM_DIRS,
    CpuFacts,
    LoaderPlatform,
    detect_platform,
    hwcaps_for,
    platform_for,
)

BASE = {"cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2"}
V2 = BASE | {"cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2"}
V3 = V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"}
V4 = V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


@pytest.mark.parametrize(
    "flags, levels",
    [
        (BASE, ()),
        (V2, ("x86-64-v2",)),
        (V3, ("x86-64-v3", "x86-64-v2")),
        (V4, ("x86-64-v4", "x86-64-v3", "x86-64-v2")),
        (V4 - {"pni"}, ()),  # each level needs all below it
        (V3 - {"movbe"}, ("x86-64-v2",)),
    ],
)
def test_hwcaps_levels(flags, levels):
    assert hwcaps_for(CpuFacts("AuthenticAMD", frozenset(flags))) == levels


@pytest.mark.parametrize(
    "vendor, flags, platform, hwcaps",
    [
        ("GenuineIntel", V4, "haswell", ("x86_64", "avx512_1")),
        ("GenuineIntel", V3, "haswell", ("x86_64",)),
        ("GenuineIntel", V2, "x86_64", ("x86_64",)),
        ("GenuineIntel", V4 | {"avx512er", "avx512pf"}, "xeon_phi", ("x86_64",)),
        ("AuthenticAMD", V4, "x86_64", ("x86_64",)),  # glibc sets haswell/xeon_phi and avx512_1 only on Intel
    ],
)
def test_platform_and_legacy_hwcaps(vendor, flags, platform, hwcaps):
    assert platform_for(CpuFacts(vendor, frozenset(flags))) == (platform, hwcaps)


def ld_so_help() -> str:
    return subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--help"], capture_output=True, text=True).stdout


def test_this_machine_matches_ld_so_help():
    help_text = ld_so_help()
    platform = detect_platform()
    supported = re.findall(r"^\s+(x86-64-v\d) \(supported, searched\)", help_text, re.M)
    assert list(platform.hwcaps) == supported
    legacy = (
        re.findall(r"^\s+(\S+) \((?:AT_PLATFORM; )?supported, searched\)", help_text.split("Legacy HWCAP")[1], re.M)
        if "Legacy HWCAP" in help_text
        else []
    )
    at_platform = re.search(r"^\s+(\S+) \(AT_PLATFORM", help_text, re.M)
    if at_platform:
        assert platform.platform == at_platform.group(1)
    assert platform.legacy_subdirs == bool(legacy)
    assert set(legacy) <= {"tls", platform.platform, *platform.legacy_hwcaps}
    system = re.findall(r"^\s+(\S+) \(system search path\)", help_text, re.M)
    assert list(platform.system_dirs) == system


def test_subdirectory_order_is_what_the_loader_tries(tmp_path):
    """LD_DEBUG=libs prints every subdirectory it tries for a RUNPATH directory that does not exist."""
    from tests.support.elfbuild import ElfBuilder

    b = ElfBuilder(tmp_path)
    top = b.lib("t/libtop.so", needed=["libnothere.so"], runpath=str(tmp_path / "nodir"))
    out = subprocess.run(["ldd", str(top)], capture_output=True, text=True, env={"LD_DEBUG": "libs"})
    tried = re.findall(
        r"trying file=" + re.escape(str(tmp_path / "nodir")) + r"/(.*)libnothere\.so", out.stdout + out.stderr
    )
    assert tried and tuple(tried[: len(detect_platform().subdirs)]) == detect_platform().subdirs


def test_platform_and_lib_tokens_match_the_loader(tmp_path):
    from tests.support.elfbuild import ElfBuilder

    b = ElfBuilder(tmp_path)
    top = b.lib("t/libtop.so", needed=["libnothere.so"], runpath="/tok/$LIB/$PLATFORM")
    out = subprocess.run(["ldd", str(top)], capture_output=True, text=True, env={"LD_DEBUG": "libs"})
    platform = detect_platform()
    assert f"/tok/{platform.lib}/{platform.platform}/" in out.stdout + out.stderr


def test_rpm_layout_is_detected_in_an_image(tmp_path):
    (tmp_path / "usr/lib64").mkdir(parents=True)
    platform = detect_platform(str(tmp_path), cpu=CpuFacts("AuthenticAMD", frozenset(V3)))
    assert (platform.lib, platform.system_dirs, platform.platform) == ("lib64", RPM_SYSTEM_DIRS, "x86_64")


def test_glibc_2_37_image_has_no_legacy_subdirs(tmp_path):
    libdir = tmp_path / "lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "libc.so.6").write_bytes(b"\x7fELF...GNU C Library (Debian GLIBC 2.37-1) stable release version 2.37.")
    platform = detect_platform(str(tmp_path), cpu=CpuFacts("GenuineIntel", frozenset(V3)))
    assert platform.glibc == (2, 37) and not platform.legacy_subdirs
    assert platform.subdirs == ("glibc-hwcaps/x86-64-v3/", "glibc-hwcaps/x86-64-v2/", "")


def test_legacy_combinations_follow_glibc_2_36_order():
    platform = LoaderPlatform(hwcaps=(), platform="haswell", legacy_hwcaps=("x86_64", "avx512_1"))
    assert platform.subdirs[:4] == (
        "tls/haswell/avx512_1/x86_64/",
        "tls/haswell/avx512_1/",
        "tls/haswell/x86_64/",
        "tls/haswell/",
    )
    assert platform.subdirs[-3:] == ("avx512_1/", "x86_64/", "")
    assert len(platform.subdirs) == 16
