"""What the loader's search depends on besides the files: the CPU, the glibc release and the distribution's layout.

Everything is a field of a frozen `LoaderPlatform` so tests (and analyses of another machine's image) can pin it;
`detect_platform()` derives the defaults from this machine's CPU and from the analysed root's files, using the same
rules as glibc (x86-64 only: that is what the fleet runs):

- glibc-hwcaps levels x86-64-v2/v3/v4: sysdeps/x86/get-isa-level.h (each level needs the one below);
- AT_PLATFORM / $PLATFORM: "haswell" or "xeon_phi" only on Intel CPUs (sysdeps/x86/cpu-features.c), otherwise the
  kernel's "x86_64"; the legacy hwcap names "x86_64" and, on Intel with AVX-512 F/CD/BW/DQ/VL, "avx512_1";
- legacy hwcap subdirectories (tls/, haswell/, avx512_1/, x86_64/ and their combinations) are searched up to glibc
  2.36 and were removed in 2.37;
- $LIB and the system directories: Debian/Ubuntu multiarch (lib/x86_64-linux-gnu) or RPM (lib64).

It does not model tunables that change these (glibc.cpu.hwcaps, glibc.cpu.hwcap_mask, LD_HWCAP_MASK) nor setuid
programs' restrictions.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product

from verify.ld.elf import EM_X86_64
from verify.safe_read import read_bytes, read_text

HWCAP_X86_64 = 1 << 1  # sysdeps/x86/dl-hwcap.h
HWCAP_X86_AVX512_1 = 1 << 2
HWCAP_TLS = 1 << 63  # _DL_HWCAP_TLS_MASK
_FIRST_PLATFORM_BIT = 48  # _DL_FIRST_PLATFORM; platforms "i586", "i686", "haswell", "xeon_phi"
_PLATFORM_BITS = {"i586": 1 << 48, "i686": 1 << 49, "haswell": 1 << 50, "xeon_phi": 1 << 51}
HWCAP_PLATFORM_MASK = 0xF << _FIRST_PLATFORM_BIT
_LEGACY_HWCAP_BITS = {"x86_64": HWCAP_X86_64, "avx512_1": HWCAP_X86_AVX512_1}

DEBIAN_SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")
RPM_SYSTEM_DIRS = ("/lib64", "/usr/lib64")

# /proc/cpuinfo flag names for the features glibc checks (Linux spells SSE3 "pni" and LZCNT "abm").
_V2 = ("cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2")
_V3 = ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe")
_V4 = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_BASELINE = ("cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2")
_HASWELL = ("avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt")


@dataclass(frozen=True)
class LoaderPlatform:
    """The loader facts a search depends on besides the files (see the module docstring)."""

    machine: int = EM_X86_64
    elf_class: int = 64
    lib: str = "lib/x86_64-linux-gnu"  # $LIB
    platform: str = "x86_64"  # $PLATFORM, i.e. AT_PLATFORM as glibc leaves it
    hwcaps: tuple[str, ...] = ()  # glibc-hwcaps subdirectories searched, best first (e.g. x86-64-v3, x86-64-v2)
    legacy_hwcaps: tuple[str, ...] = ("x86_64",)  # legacy hwcap names, in glibc's bit order
    legacy_subdirs: bool = True  # glibc < 2.37 also tries tls/, $PLATFORM/, … subdirectories
    system_dirs: tuple[str, ...] = DEBIAN_SYSTEM_DIRS
    interpreter: str = "/lib64/ld-linux-x86-64.so.2"
    interpreter_soname: str = "ld-linux-x86-64.so.2"
    glibc: tuple[int, int] | None = (2, 36)
    cache_flags: int = 0x0303  # FLAG_ELF_LIBC6 | FLAG_X8664_LIB64: what x86-64 ld.so accepts from ld.so.cache
    isa_level: int = 0  # highest x86-64 level the CPU supports: 0 baseline, 1 v2, 2 v3, 3 v4
    notes: tuple[str, ...] = field(default=(), compare=False)  # how each value was determined

    @cached_property
    def subdirs(self) -> tuple[str, ...]:
        """Every directory is tried as DIR/<each of these>/NAME, in this order ('' is DIR itself).

        Cached on the instance (cached_property writes the instance's __dict__, which a frozen dataclass allows): the
        resolver asks for it on every directory walk."""
        return tuple(f"glibc-hwcaps/{level}/" for level in self.hwcaps) + self._legacy() + ("",)

    def _legacy(self) -> tuple[str, ...]:
        # elf/dl-hwcaps.c (2.36): components are the hwcap names (bit order), then the platform, then "tls"; every
        # non-empty combination is tried, all-of-them first, with the components written last-first.
        if not self.legacy_subdirs:
            return ()
        parts = ["tls", *([self.platform] if self.platform else []), *reversed(self.legacy_hwcaps)]
        subdirs = []
        for mask in product((1, 0), repeat=len(parts)):
            if any(mask):
                subdirs.append("".join(f"{part}/" for part, used in zip(parts, mask) if used))
        return tuple(subdirs)

    @property
    def dl_hwcap(self) -> int:
        value = 0
        for name in self.legacy_hwcaps:
            value |= _LEGACY_HWCAP_BITS.get(name, 0)
        return value

    @property
    def platform_bit(self) -> int | None:
        return _PLATFORM_BITS.get(self.platform)

    def summary(self) -> dict:
        return {
            "glibc": ".".join(map(str, self.glibc)) if self.glibc else None,
            "platform": self.platform,
            "lib": self.lib,
            "hwcaps": list(self.hwcaps),
            "legacy_hwcaps": list(self.legacy_hwcaps) if self.legacy_subdirs else [],
            "system_dirs": list(self.system_dirs),
            "interpreter": self.interpreter,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class CpuFacts:
    """What glibc reads about the CPU to choose hwcaps subdirectories and $PLATFORM."""

    vendor: str  # "GenuineIntel", "AuthenticAMD", …
    flags: frozenset[str]


def read_cpu(cpuinfo: str = "/proc/cpuinfo") -> CpuFacts:
    vendor, flags = "", frozenset()
    for line in read_text(cpuinfo, 16 << 20, errors="replace").splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key == "flags":
            flags = frozenset(value.split())
            break
    return CpuFacts(vendor, flags)


def isa_level(flags: frozenset[str]) -> int:
    """-1 below baseline, 0 baseline, 1 x86-64-v2, 2 v3, 3 v4 (each level needs all below it, as in glibc)."""
    level = -1
    for number, needed in enumerate((_BASELINE, _V2, _V3, _V4)):
        if not all(flag in flags for flag in needed):
            break
        level = number
    return level


def hwcaps_for(cpu: CpuFacts) -> tuple[str, ...]:
    level = isa_level(cpu.flags)
    return tuple(f"x86-64-v{n}" for n in range(level + 1, 1, -1) if n <= 4)


def platform_for(cpu: CpuFacts) -> tuple[str, tuple[str, ...]]:
    """(AT_PLATFORM, legacy hwcap names) as glibc's init_cpu_features sets them on x86-64."""
    hwcap_names = ["x86_64"]
    platform = None
    if cpu.vendor == "GenuineIntel":
        flags = cpu.flags
        if "avx512cd" in flags:
            if "avx512er" in flags:
                if "avx512pf" in flags:
                    platform = "xeon_phi"
            elif all(f in flags for f in ("avx512bw", "avx512dq", "avx512vl")):
                hwcap_names.append("avx512_1")
        if platform is None and all(f in flags for f in _HASWELL):
            platform = "haswell"
    return platform or "x86_64", tuple(hwcap_names)


def glibc_version_of(root: str, fs=None) -> tuple[int, int] | None:
    """The glibc release of the analysed system: this process's for '/', else read from the image's libc.so.6."""
    if root in ("", "/"):
        version = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
        found = re.search(r"(\d+)\.(\d+)", version or "")
        return (int(found.group(1)), int(found.group(2))) if found else None
    for candidate in (
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ):
        real = fs.host_path(candidate) if fs else os.path.join(root, candidate.lstrip("/"))
        if real and os.path.isfile(real):
            try:
                found = re.search(rb"release version (\d+)\.(\d+)", read_bytes(real, 64 << 20, follow=fs is None))
            except OSError:
                continue
            if found:
                return int(found.group(1)), int(found.group(2))
    return None


def detect_platform(root: str = "/", *, cpu: CpuFacts | None = None, fs=None) -> LoaderPlatform:
    """The loader facts for analysing `root` on this machine's CPU (pass `cpu` to analyse for another CPU)."""
    notes = []
    if cpu is None:
        try:
            cpu = read_cpu()
            notes.append("CPU features from /proc/cpuinfo")
        except OSError:
            cpu = CpuFacts("", frozenset())
            notes.append("no /proc/cpuinfo: baseline CPU assumed")
    platform, hwcap_names = platform_for(cpu)
    glibc = glibc_version_of(root, fs)
    if glibc is None:
        notes.append("glibc release unknown: 2.36 rules assumed")
    debian = _is_dir(root, fs, "/usr/lib/x86_64-linux-gnu") or _is_dir(root, fs, "/lib/x86_64-linux-gnu")
    if not debian:
        notes.append("no /usr/lib/x86_64-linux-gnu: RPM layout assumed ($LIB=lib64)")
    return LoaderPlatform(
        lib="lib/x86_64-linux-gnu" if debian else "lib64",
        platform=platform,
        hwcaps=hwcaps_for(cpu),
        legacy_hwcaps=hwcap_names,
        legacy_subdirs=(glibc or (2, 36)) < (2, 37),
        system_dirs=DEBIAN_SYSTEM_DIRS if debian else RPM_SYSTEM_DIRS,
        glibc=glibc or (2, 36),
        isa_level=max(isa_level(cpu.flags), 0),
        notes=tuple(notes),
    )


def _is_dir(root: str, fs, path: str) -> bool:
    real = fs.host_path(path) if fs else os.path.join(root, path.lstrip("/"))
    return bool(real) and os.path.isdir(real)
