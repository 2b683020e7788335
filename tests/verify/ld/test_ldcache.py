"""verify/ld/ldcache.py against `ldconfig -p` (the machine's cache and caches built here with `ldconfig -C`)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support.elfbuild import ElfBuilder
from verify.ld.ldcache import LdCacheError, parse_ld_cache, read_ld_cache, read_ld_so_conf
from verify.ld.platform import LoaderPlatform, detect_platform


def ldconfig_p(cache) -> list[tuple[str, str, str]]:
    out = subprocess.run(["ldconfig", "-p", "-C", str(cache)], capture_output=True, text=True, check=True).stdout
    entries = []
    for line in out.splitlines():
        found = re.match(r"\t(\S+) \((.*?)\) => (.*)$", line)
        if found:
            hwcaps = re.search(r'hwcap: "([^"]+)"', found.group(2))
            entries.append((found.group(1), found.group(3), hwcaps.group(1) if hwcaps else ""))
    return entries


def ours(cache) -> list[tuple[str, str, str]]:
    return [(e.name, e.path, e.hwcaps_name or "") for e in read_ld_cache(str(cache)).entries]


def test_machine_cache_equals_ldconfig_p():
    expected = ldconfig_p("/etc/ld.so.cache")
    assert expected and ours("/etc/ld.so.cache") == expected


def build(tmp_path, dirs, fmt="new"):
    conf = tmp_path / "ld.so.conf"
    conf.write_text("".join(f"{d}\n" for d in dirs))
    cache = tmp_path / f"ld.so.cache.{fmt}"
    subprocess.run(["ldconfig", "-X", "-c", fmt, "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    return cache


@pytest.fixture
def hwcaps_dir(tmp_path):
    b = ElfBuilder(tmp_path)
    for sub in (
        "",
        "glibc-hwcaps/x86-64-v2/",
        "glibc-hwcaps/x86-64-v3/",
        "glibc-hwcaps/x86-64-v4/",
        "tls/",
        "haswell/",
        "x86_64/",
    ):
        b.lib(f"c/{sub}libh.so.1", soname="libh.so.1")
    b.lib("c/libplain.so.2", soname="libplain.so.2")
    return tmp_path / "c"


def test_built_cache_with_hwcaps_equals_ldconfig_p(tmp_path, hwcaps_dir):
    cache = build(tmp_path, [hwcaps_dir])
    entries = ours(cache)
    assert entries == ldconfig_p(cache)
    assert {h for n, _, h in entries if n == "libh.so.1"} >= {"x86-64-v2", "x86-64-v3", "x86-64-v4"}


def test_old_format_block_in_front_is_skipped(tmp_path, hwcaps_dir):
    """The "compat" layout (an ld.so-1.7.0 block, then the new cache 8-byte aligned). This ldconfig aborts when asked
    for it with hwcaps present, so the old block (two 12-byte entries) is put in front of a new cache here."""
    import struct

    new = build(tmp_path, [hwcaps_dir]).read_bytes()
    old = b"ld.so-1.7.0\0" + struct.pack("<I", 2) + b"\0" * 24
    old += b"\0" * (-len(old) % 8)
    combined = parse_ld_cache(old + new, "compat")
    assert [(e.name, e.path) for e in combined.entries] == [(e.name, e.path) for e in parse_ld_cache(new).entries]


@pytest.mark.parametrize(
    "levels, expected",
    [
        (("x86-64-v4", "x86-64-v3", "x86-64-v2"), "glibc-hwcaps/x86-64-v4/"),
        (("x86-64-v3", "x86-64-v2"), "glibc-hwcaps/x86-64-v3/"),
        (("x86-64-v2",), "glibc-hwcaps/x86-64-v2/"),
    ],
)
def test_lookup_takes_the_best_supported_hwcaps_level(tmp_path, hwcaps_dir, levels, expected):
    cache = read_ld_cache(str(build(tmp_path, [hwcaps_dir])))
    platform = LoaderPlatform(hwcaps=levels, isa_level=len(levels))
    assert cache.lookup("libh.so.1", platform) == f"{hwcaps_dir}/{expected}libh.so.1"


def test_lookup_without_hwcaps_uses_legacy_entries_up_to_2_36_and_plain_after(tmp_path, hwcaps_dir):
    cache = read_ld_cache(str(build(tmp_path, [hwcaps_dir])))
    legacy = LoaderPlatform(hwcaps=(), platform="x86_64", legacy_hwcaps=("x86_64",), legacy_subdirs=True)
    modern = LoaderPlatform(hwcaps=(), platform="x86_64", legacy_hwcaps=("x86_64",), legacy_subdirs=False)
    assert cache.lookup("libh.so.1", legacy).rsplit("/", 2)[-2] in ("tls", "x86_64")  # ldconfig's order decides
    assert cache.lookup("libh.so.1", modern) == f"{hwcaps_dir}/libh.so.1"
    amd = LoaderPlatform(hwcaps=(), platform="x86_64", legacy_hwcaps=("x86_64",))
    assert "haswell" not in cache.lookup("libh.so.1", amd)  # platform entries need that exact AT_PLATFORM
    assert cache.lookup("libplain.so.2", modern) == f"{hwcaps_dir}/libplain.so.2"
    assert cache.lookup("libnothere.so", modern) is None


def test_entries_for_other_abis_are_ignored(tmp_path, hwcaps_dir):
    cache = read_ld_cache(str(build(tmp_path, [hwcaps_dir])))
    platform = LoaderPlatform(cache_flags=0x0003)  # what an i386 loader would accept
    assert cache.lookup("libplain.so.2", platform) is None


@pytest.mark.parametrize("data", [b"", b"garbage" * 10, b"glibc-ld.so.cache1.1" + b"\xff" * 40])
def test_broken_cache_is_one_error_naming_the_file(data):
    with pytest.raises(LdCacheError) as caught:
        parse_ld_cache(data, "/img/etc/ld.so.cache")
    assert str(caught.value).startswith("/img/etc/ld.so.cache: ") and "\n" not in str(caught.value)


def test_no_cache_is_none(tmp_path):
    assert read_ld_cache(str(tmp_path / "absent")) is None


def test_ld_so_conf_with_includes_and_comments(tmp_path):
    (tmp_path / "etc/ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc/ld.so.conf").write_text("# comment\ninclude /etc/ld.so.conf.d/*.conf\n/usr/local/lib\n")
    (tmp_path / "etc/ld.so.conf.d/10-rocm.conf").write_text("/opt/rocm-7.2.4/lib  # ROCm\n")
    (tmp_path / "etc/ld.so.conf.d/20-x.conf").write_text("/opt/x/lib/\n/usr/local/lib\n")
    dirs = read_ld_so_conf("/etc/ld.so.conf", lambda p: str(tmp_path) + p)
    assert dirs == ("/opt/rocm-7.2.4/lib", "/opt/x/lib", "/usr/local/lib")


def test_this_machines_cache_finds_libc():
    assert read_ld_cache("/etc/ld.so.cache").lookup("libc.so.6", detect_platform()).endswith("/libc.so.6")
