"""Read what the dynamic loader reads from an ELF file: the ELF header, the program headers, PT_INTERP, PT_DYNAMIC
and the strings it points to — nothing else.

Why not pyelftools' ELFFile/iter_segments: they read section headers and build DynamicSegment objects that parse the
symbol hash tables, which costs tens of milliseconds on torch's 0.4–1.3 GB libraries; the loader needs none of it
(and a file whose section headers are stripped or cut off still loads). So this module uses pyelftools' struct
definitions (`ELFStructs` + `struct_parse`) on just those few byte ranges: the cost does not grow with file size.

Every file is hostile input (this runs as root on workstations): files are opened through verify/safe_read.py
(regular files only, never blocking) and every read is bounded by the file's real size *and* by a limit no real file
comes near (program headers by their 16-bit count, PT_INTERP by PATH_MAX, PT_DYNAMIC by `MAX_DYNAMIC`, strings by
64 KiB): a sparse file claiming a terabyte of dynamic section is an ElfError naming it, not a MemoryError.

What it does not do: relocations, symbols, versions, notes — the linkage analysis only needs names and paths.

pyelftools is imported on the first parse, not with this module: importing it costs ~65 ms of CPU, and most modules
that import this one for its types (the strays scan, the apt hook's and the deploy's strays fact on a host with no
stray library) parse no file at all.
"""

from __future__ import annotations

import functools
import io
import os
import struct
from dataclasses import dataclass
from types import SimpleNamespace

from verify.safe_read import NotRegularFile, open_regular

ELF_MAGIC = b"\x7fELF"
# The gABI's numbers (pyelftools' enums hold the same: tests/verify/ld/test_elf.py compares them).
EM_X86_64 = 62
EM_386 = 3
DF_1_NODEFLIB = 0x800

_PT_LOAD = 1
_PT_DYNAMIC = 2
_PT_INTERP = 3
_HEAD = 4096  # one read covers the ELF header and the program headers of nearly every file
_MAX_STRING = 64 * 1024  # longer NEEDED/RPATH strings than this are not real
_MAX_INTERP = 4096  # PATH_MAX: the kernel refuses a longer PT_INTERP
# A real dynamic section has tens of entries (torch's largest libraries: under 60, 16 bytes each); glibc reads it up
# to DT_NULL. 1 MiB is 65,536 entries: more is a corrupt or hostile file, not something to read into memory.
MAX_DYNAMIC = 1 << 20


class ElfError(Exception):
    """The file cannot be read as ELF the way the loader needs; the message is one line naming the file."""

    def __init__(self, path: str, reason: str, head: bytes = b"", *, not_regular: bool = False):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.head = head  # the first bytes read (up to 64), so the loader model can apply glibc's own checks
        self.not_regular = not_regular  # a FIFO, a device … : never opened for reading (verify/safe_read.py)


@dataclass(frozen=True)
class ElfInfo:
    """The loader-relevant facts of one ELF file (paths and strings exactly as stored, DSTs not expanded)."""

    path: str
    elf_class: int  # 32 or 64
    little_endian: bool
    ident_version: int  # e_ident[EI_VERSION]
    osabi: int
    abiversion: int
    ident_padding_zero: bool
    e_type: str  # "ET_DYN", "ET_EXEC", … (or "0x…" when unknown)
    machine: int  # e_machine, numeric (62 = x86-64)
    version: int  # e_version
    phentsize: int
    interp: str | None = None
    has_dynamic: bool = False
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None  # raw DT_RPATH; see effective_rpath for what glibc uses
    runpath: str | None = None
    flags_1: int = 0

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def effective_rpath(self) -> str | None:
        """glibc ignores DT_RPATH entirely when the same object has DT_RUNPATH (elf/get-dynamic-info.h)."""
        return None if self.runpath is not None else self.rpath

    @property
    def machine_name(self) -> str:
        return _elftools().machine_names.get(self.machine, hex(self.machine))


@functools.cache
def _elftools() -> SimpleNamespace:
    """What this module uses of pyelftools, imported once, on first use (see the module's docstring)."""
    from elftools.common.exceptions import ELFError
    from elftools.common.utils import struct_parse
    from elftools.construct import ConstructError
    from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE, ENUM_E_VERSION
    from elftools.elf.structs import ELFStructs

    return SimpleNamespace(
        ELFStructs=ELFStructs,
        struct_parse=struct_parse,
        errors=(ConstructError, ELFError),
        E_MACHINE=ENUM_E_MACHINE,
        E_TYPE=ENUM_E_TYPE,
        E_VERSION=ENUM_E_VERSION,
        machine_names={v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)},
        type_names={v: k for k, v in ENUM_E_TYPE.items() if isinstance(v, int)},
    )


_STRUCTS: dict = {}


def _structs(little_endian: bool, elf_class: int):
    """pyelftools' structs for one (endianness, class), built once: building them costs more than a parse."""
    key = (little_endian, elf_class)
    structs = _STRUCTS.get(key)
    if structs is None:
        structs = _elftools().ELFStructs(little_endian=little_endian, elfclass=elf_class)
        structs.create_basic_structs()  # the ELF header; nothing machine-specific is needed
        _STRUCTS[key] = structs
    return structs


def _number(value, table: dict) -> int:
    """pyelftools' Enum fields give names for known values and ints otherwise; the loader compares numbers."""
    return value if isinstance(value, int) else table[value]


def read_elf(path: str, *, opened_path: str | None = None, follow: bool = True) -> ElfInfo:
    """Read `opened_path` (default `path`) and report it as `path` (with --root the two differ).

    `follow=False`: `opened_path` is already resolved (inside an image), a symlink there is refused, not followed.
    Raises ElfError for anything that is not a readable ELF file with sane program headers and dynamic section.
    """
    real = opened_path or path
    try:
        with open_regular(real, follow=follow) as stream:  # unbuffered: exact reads at a few offsets
            return _parse(path, stream)
    except ElfError:
        raise
    except NotRegularFile as error:
        if error.kind == "a directory":
            raise ElfError(path, "is a directory, not an ELF file", not_regular=True) from None
        raise ElfError(path, f"is {error.kind}, not a regular file", not_regular=True) from None
    except IsADirectoryError:
        raise ElfError(path, "is a directory, not an ELF file") from None
    except FileNotFoundError:
        raise ElfError(path, "no such file") from None
    except PermissionError:
        raise ElfError(path, "permission denied (run as a user who can read it)") from None
    except OSError as error:
        raise ElfError(path, f"cannot read ({error.strerror or error})") from None


def _parse(path: str, stream) -> ElfInfo:
    head = stream.read(_HEAD)
    try:
        return _parse_head(path, stream, head)
    except ElfError as error:
        error.head = head[:64]
        raise
    except (*_elftools().errors, ValueError, KeyError, OverflowError) as error:
        raise ElfError(path, f"corrupt ELF data ({error})", head[:64]) from None


def _parse_head(path: str, stream, head: bytes) -> ElfInfo:
    if len(head) < 16 or head[:4] != ELF_MAGIC:
        if head[:4] == ELF_MAGIC[: len(head[:4])] and len(head) < 16:
            raise ElfError(path, "file too short to be ELF (truncated)")
        raise ElfError(path, "not an ELF file (invalid ELF header)")
    ei_class, ei_data = head[4], head[5]
    if ei_class not in (1, 2):
        raise ElfError(path, f"invalid ELF class {ei_class} in the header")
    if ei_data not in (1, 2):
        raise ElfError(path, f"invalid ELF data encoding {ei_data} in the header")
    elf_class = 32 if ei_class == 1 else 64
    little = ei_data == 1
    structs = _structs(little, elf_class)
    ehdr_size = 52 if elf_class == 32 else 64
    if len(head) < ehdr_size:
        raise ElfError(path, "file too short for its ELF header (truncated)")
    elftools = _elftools()
    ehdr = elftools.struct_parse(structs.Elf_Ehdr, io.BytesIO(head), 0)

    phoff, phnum, phentsize = ehdr["e_phoff"], ehdr["e_phnum"], ehdr["e_phentsize"]
    expected_phentsize = 32 if elf_class == 32 else 56
    loads: list[tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    interp = None
    dynamic: tuple[int, int] | None = None
    if phnum and phentsize == expected_phentsize:
        table = _read_at(stream, head, phoff, phnum * phentsize, path, "program headers")
        for p_type, p_offset, p_vaddr, p_filesz in _program_headers(table, elf_class, little):
            if p_type == _PT_LOAD:
                loads.append((p_vaddr, p_filesz, p_offset))
            elif p_type == _PT_DYNAMIC and dynamic is None:
                dynamic = (p_offset, p_filesz)
            elif p_type == _PT_INTERP and interp is None:
                raw = _read_at(stream, head, p_offset, p_filesz, path, "PT_INTERP", limit=_MAX_INTERP)
                interp = raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")

    fields = dict(
        path=path,
        elf_class=elf_class,
        little_endian=little,
        ident_version=head[6],
        osabi=head[7],
        abiversion=head[8],
        ident_padding_zero=not any(head[9:16]),
        e_type=(
            elftools.type_names.get(_number(ehdr["e_type"], elftools.E_TYPE), None)
            or hex(_number(ehdr["e_type"], elftools.E_TYPE))
        ),
        machine=_number(ehdr["e_machine"], elftools.E_MACHINE),
        version=_number(ehdr["e_version"], elftools.E_VERSION),
        phentsize=phentsize,
        interp=interp,
    )
    if dynamic is None:
        return ElfInfo(**fields)
    return ElfInfo(**fields, has_dynamic=True, **_read_dynamic(stream, head, structs, dynamic, loads, path))


def _read_dynamic(stream, head: bytes, structs, dynamic, loads, path: str) -> dict:
    offset, size = dynamic
    raw = _read_at(stream, head, offset, size, path, "PT_DYNAMIC", limit=MAX_DYNAMIC)
    needed: list[int] = []
    last: dict[int, int] = {}  # glibc keeps the last entry of each tag in l_info[]
    for tag, value in _dynamic_entries(raw, structs):
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            needed.append(value)
        else:
            last[tag] = value
    strtab = last.get(5)  # DT_STRTAB
    if strtab is None:
        if needed or any(tag in last for tag in (14, 15, 29)):
            raise ElfError(path, "dynamic section has names but no DT_STRTAB (corrupt)")
        return {"flags_1": last.get(0x6FFFFFFB, 0)}
    strtab_offset = _vaddr_to_offset(strtab, loads, path)
    strsz = last.get(10)  # DT_STRSZ

    # The few strings needed usually sit together at the start of .dynstr: read that span once instead of seeking
    # for each one (libraries with dozens of DT_NEEDED entries otherwise cost a read per name).
    indexes = [*needed, *(last[tag] for tag in (14, 15, 29) if tag in last)]
    window = b""
    low = min(indexes) if indexes else 0
    if indexes and max(indexes) - low < _MAX_STRING:
        stream.seek(strtab_offset + low)
        window = stream.read(max(indexes) - low + 512)

    def string(index: int) -> str:
        if strsz is not None and index >= strsz:
            raise ElfError(path, f"string offset {index} beyond DT_STRSZ {strsz} (corrupt dynamic section)")
        if window and index >= low:
            end = window.find(b"\0", index - low)
            if end >= 0:
                return window[index - low : end].decode("utf-8", "surrogateescape")
        return _read_string(stream, strtab_offset + index, path)

    return {
        "soname": string(last[14]) if 14 in last else None,
        "needed": tuple(string(index) for index in needed),
        "rpath": string(last[15]) if 15 in last else None,
        "runpath": string(last[29]) if 29 in last else None,
        "flags_1": last.get(0x6FFFFFFB, 0),
    }


# Program headers and dynamic entries are flat arrays of fixed-size records. pyelftools' construct-based parse of each
# record costs ~25 us, which over a venv's hundreds of files and thousands of records dominated the whole analysis; the
# records' layouts (pyelftools' Elf_Phdr/Elf_Dyn, the gABI's) are fixed, so they are unpacked with `struct` here, while
# pyelftools parses the ELF header that locates them.
_PHDR_FORMATS = {
    (64, True): ("<IIQQQQQQ", (0, 2, 3, 5)),
    (64, False): (">IIQQQQQQ", (0, 2, 3, 5)),
    (32, True): ("<IIIIIIII", (0, 1, 2, 4)),
    (32, False): (">IIIIIIII", (0, 1, 2, 4)),
}
_DYN_FORMATS = {(64, True): "<qQ", (64, False): ">qQ", (32, True): "<iI", (32, False): ">iI"}


def _program_headers(table: bytes, elf_class: int, little: bool):
    """(p_type, p_offset, p_vaddr, p_filesz) of each program header."""
    layout, (t, o, v, f) = _PHDR_FORMATS[(elf_class, little)]
    for record in struct.iter_unpack(layout, table):
        yield record[t], record[o], record[v], record[f]


def _dynamic_entries(raw: bytes, structs):
    layout = _DYN_FORMATS[(structs.elfclass, structs.little_endian)]
    usable = len(raw) - len(raw) % struct.calcsize(layout)
    return struct.iter_unpack(layout, raw[:usable])


def _vaddr_to_offset(vaddr: int, loads, path: str) -> int:
    """DT_STRTAB holds a virtual address: map it through the PT_LOAD segment that contains it."""
    for p_vaddr, p_filesz, p_offset in loads:
        if p_vaddr <= vaddr < p_vaddr + p_filesz:
            return vaddr - p_vaddr + p_offset
    raise ElfError(path, f"DT_STRTAB address {vaddr:#x} is in no PT_LOAD segment (corrupt)")


def _read_at(stream, head: bytes, offset: int, size: int, path: str, what: str, limit: int | None = None) -> bytes:
    if offset + size <= len(head):
        return head[offset : offset + size]
    # Sizes come from the file: a corrupt one (p_filesz = 2**60) must be an ElfError, not a MemoryError from
    # allocating the read buffer, so check against the file's real size first — and against a bound no real file
    # comes near, since a sparse file can really be a terabyte long and still cost no disk.
    if offset + size > os.fstat(stream.fileno()).st_size:
        raise ElfError(path, f"{what} at offset {offset:#x} (+{size} bytes) runs past the end of the file (truncated)")
    if limit is not None and size > limit:
        raise ElfError(
            path,
            f"{what} at offset {offset:#x} claims {size} bytes, more than any real one "
            f"(limit {limit} bytes): corrupt or hostile, not read",
        )
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise ElfError(path, f"{what} at offset {offset:#x} (+{size} bytes) runs past the end of the file (truncated)")
    return data


def _read_string(stream, offset: int, path: str) -> str:
    stream.seek(offset)
    chunks = []
    total = 0
    while total < _MAX_STRING:
        chunk = stream.read(256)
        if not chunk:
            raise ElfError(path, f"string at offset {offset:#x} runs past the end of the file (truncated)")
        end = chunk.find(b"\0")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks).decode("utf-8", "surrogateescape")
        chunks.append(chunk)
        total += len(chunk)
    raise ElfError(path, f"string at offset {offset:#x} is not terminated within {_MAX_STRING} bytes (corrupt)")
