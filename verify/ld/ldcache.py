"""/etc/ld.so.cache, read the way ld.so reads it (glibc elf/dl-cache.c), and the ld.so.conf fallback.

Format `glibc-ld.so.cache1.1` (the only one ldconfig writes since glibc 2.32; an old `ld.so-1.7.0` block in front of it,
the "compat" format, is skipped): a 48-byte header, `nlibs` entries of 24 bytes
`{i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap}`, strings addressed from the header's start, and an
extension directory (magic 0xEAA42174) whose tag-1 section names the glibc-hwcaps subdirectories. An entry with hwcap
bit 62 set is a glibc-hwcaps entry: its low 32 bits index that name table and bits 32.. hold the library's x86 ISA
level.

Lookup (`LdCache.lookup`) follows `_dl_load_cache_lookup`: among the entries for the name, in file order, only flags
equal to the platform's (x86-64: 0x0303) count; glibc-hwcaps entries compete by the CPU's preference order; the
first ordinary entry ends the search unless a glibc-hwcaps entry was already chosen; legacy hwcap entries (tls, haswell,
…) count only up to glibc 2.36 and only for this CPU's hwcap bits and platform.

When a system has no cache at all, glibc searches only the system directories. `read_ld_so_conf` is a fallback for
images where ldconfig never ran: it lists the directories ldconfig *would* put into the cache, and the resolver labels
what it finds there "ld.so.conf" so nobody mistakes it for the loader's own behaviour.

Both files are read through verify/safe_read.py: regular files only, never blocking, at most `MAX_CACHE` /
`MAX_CONF` bytes (a real cache is a few hundred KiB; glibc's own loader maps whatever is there).
"""

from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass

from verify.ld.platform import HWCAP_PLATFORM_MASK, HWCAP_TLS, LoaderPlatform
from verify.safe_read import read_bytes, read_text

NEW_MAGIC = b"glibc-ld.so.cache1.1"
OLD_MAGIC = b"ld.so-1.7.0"
EXTENSION_MAGIC = 0xEAA42174
EXTENSION_TAG_GLIBC_HWCAPS = 1
HWCAP_EXTENSION = 1 << 62
ISA_LEVEL_MASK = 0x3FF  # DL_CACHE_HWCAP_ISA_LEVEL_MASK (x86)
_HEADER = struct.Struct("<20sIIB3xI12x")
_ENTRY = struct.Struct("<iIIIQ")
MAX_CACHE = 64 << 20
MAX_CONF = 1 << 20


class LdCacheError(Exception):
    """The cache file is not a glibc ld.so.cache (the message names the file)."""


@dataclass(frozen=True)
class CacheEntry:
    """One entry of ld.so.cache: a library name and the path ldconfig recorded for it."""

    name: str
    path: str
    flags: int
    hwcap: int
    hwcaps_name: str | None = None  # the glibc-hwcaps subdirectory, for extension entries

    @property
    def isa_level(self) -> int:
        return (self.hwcap >> 32) & ISA_LEVEL_MASK if self.hwcaps_name is not None else 0


class LdCache:
    """A parsed ld.so.cache: entries by name, in file order.

    Built from plain (name, path, flags, hwcap, hwcaps_name) rows; the CacheEntry objects are made when first asked
    for: an analysis looks up a few dozen of a cache's hundreds or thousands of names."""

    def __init__(self, path: str, rows: list[tuple[str, str, int, int, str | None]]):
        self.path = path
        self._rows = rows
        self._rows_by_name: dict[str, list[tuple]] = {}
        for row in rows:
            self._rows_by_name.setdefault(row[0], []).append(row)
        self._by_name: dict[str, list[CacheEntry]] = {}

    @property
    def entries(self) -> list[CacheEntry]:
        return [CacheEntry(*row) for row in self._rows]

    def candidates(self, name: str) -> list[CacheEntry]:
        found = self._by_name.get(name)
        if found is None:
            found = self._by_name[name] = [CacheEntry(*row) for row in self._rows_by_name.get(name, ())]
        return found

    def lookup(self, name: str, platform: LoaderPlatform) -> str | None:
        best: CacheEntry | None = None
        best_priority = 0
        hwcap_exclude = ~(platform.dl_hwcap | HWCAP_PLATFORM_MASK | HWCAP_TLS) & ((1 << 64) - 1)
        platform_bit = platform.platform_bit
        for entry in self.candidates(name):
            if entry.flags != platform.cache_flags:
                continue
            named = entry.hwcaps_name is not None
            if named and entry.isa_level > platform.isa_level:
                continue
            if not named and best is not None:
                break  # glibc-hwcaps entries come first; an ordinary one after a match ends the search
            if not named and entry.hwcap:
                if not platform.legacy_subdirs:
                    continue  # glibc 2.37 dropped legacy hwcaps
                if entry.hwcap & hwcap_exclude:
                    continue
                entry_platform = entry.hwcap & HWCAP_PLATFORM_MASK
                if entry_platform and entry_platform != platform_bit:
                    continue
            if named:
                if entry.hwcaps_name not in platform.hwcaps:
                    continue
                priority = platform.hwcaps.index(entry.hwcaps_name) + 1
                if best is not None and priority >= best_priority:
                    continue
                best_priority = priority
            best = entry
            if not named:
                break
        return best.path if best else None


def parse_ld_cache(data: bytes, path: str = "/etc/ld.so.cache") -> LdCache:
    start = 0
    if data.startswith(OLD_MAGIC):
        if len(data) < 16:
            raise LdCacheError(f"{path}: truncated ld.so.cache (old-format header)")
        (old_count,) = struct.unpack_from("<I", data, 12)
        start = (16 + old_count * 12 + 7) & ~7  # the new-format cache follows, 8-byte aligned
        if not data.startswith(NEW_MAGIC, start):
            raise LdCacheError(f"{path}: old-format-only ld.so.cache (glibc >= 2.32 ignores it): run ldconfig")
    elif not data.startswith(NEW_MAGIC):
        raise LdCacheError(f"{path}: not a glibc ld.so.cache (bad magic): regenerate it with ldconfig")
    if len(data) < start + _HEADER.size:
        raise LdCacheError(f"{path}: truncated ld.so.cache header")
    _, nlibs, len_strings, _flags, extension_offset = _HEADER.unpack_from(data, start)
    if start + _HEADER.size + nlibs * _ENTRY.size > len(data):
        raise LdCacheError(f"{path}: ld.so.cache claims {nlibs} entries but is truncated: regenerate it with ldconfig")
    base = data[start:]
    hwcaps_names = _hwcaps_names(base, extension_offset)

    def string(offset: int) -> str:
        end = base.find(b"\0", offset)
        if offset >= len(base) or end < 0:
            raise LdCacheError(f"{path}: string offset {offset} outside the file: regenerate it with ldconfig")
        return base[offset:end].decode("utf-8", "surrogateescape")

    entries = []
    for index in range(nlibs):
        flags, key, value, _osversion, hwcap = _ENTRY.unpack_from(base, _HEADER.size + index * _ENTRY.size)
        hwcaps_name = None
        if hwcap & HWCAP_EXTENSION:
            name_index = hwcap & 0xFFFFFFFF
            hwcaps_name = hwcaps_names[name_index] if name_index < len(hwcaps_names) else ""
        entries.append((string(key), string(value), flags, hwcap, hwcaps_name))
    return LdCache(path, entries)


def _hwcaps_names(base: bytes, offset: int) -> list[str]:
    if not offset or offset + 8 > len(base):
        return []
    magic, count = struct.unpack_from("<II", base, offset)
    if magic != EXTENSION_MAGIC:
        return []
    for index in range(count):
        if offset + 8 + (index + 1) * 16 > len(base):
            break
        tag, _flags, section_offset, size = struct.unpack_from("<IIII", base, offset + 8 + index * 16)
        if tag == EXTENSION_TAG_GLIBC_HWCAPS and section_offset + size <= len(base):
            names = []
            for (string_offset,) in struct.iter_unpack("<I", base[section_offset : section_offset + size]):
                end = base.find(b"\0", string_offset)
                names.append(base[string_offset:end].decode("utf-8", "surrogateescape") if end >= 0 else "")
            return names
    return []


def read_ld_cache(host_path: str, shown_path: str = "/etc/ld.so.cache", *, follow: bool = True) -> LdCache | None:
    """The cache at `host_path` (reported as `shown_path`), or None when there is none. `follow=False`: `host_path`
    is resolved already (inside an image), a symlink there is refused."""
    try:
        data = read_bytes(host_path, MAX_CACHE, follow=follow)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise LdCacheError(f"{shown_path}: cannot read ({error.strerror})") from None
    return parse_ld_cache(data, shown_path)


def read_ld_so_conf(conf: str, to_host=lambda path: path) -> tuple[str, ...]:
    """Directories named by an ld.so.conf and its `include` globs, in order, without duplicates.

    `to_host` maps an analysed-system path to where it can be read here (for --root images); globs are matched on
    the host path and reported back as the system's paths.
    """
    seen: list[str] = []
    _read_conf(conf, to_host, seen, depth=0)
    return tuple(seen)


def _read_conf(conf: str, to_host, seen: list[str], depth: int) -> None:
    if depth > 16:  # an include loop
        return
    try:
        lines = read_text(to_host(conf), MAX_CONF, errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == "include":
            for pattern in words[1:]:
                if not pattern.startswith("/"):
                    pattern = os.path.join(os.path.dirname(conf), pattern)
                host_pattern = to_host(pattern)
                prefix = host_pattern[: len(host_pattern) - len(pattern)] if host_pattern.endswith(pattern) else ""
                for match in sorted(glob.glob(host_pattern)):
                    _read_conf(match[len(prefix) :] if prefix else match, to_host, seen, depth + 1)
        elif words[0] == "hwcap":
            continue
        else:
            for directory in line.replace(",", " ").replace(":", " ").split():
                directory = directory.split("=", 1)[0].rstrip("/") or "/"
                if directory not in seen:
                    seen.append(directory)
