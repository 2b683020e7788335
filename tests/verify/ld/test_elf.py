"""verify/ld/elf.py: real gcc-built files against readelf, and truncated/corrupt copies generated here."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.elfbuild import ElfBuilder, gcc_m32_available
from verify.ld.elf import EM_386, EM_X86_64, ElfError, read_elf

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def b(tmp_path):
    return ElfBuilder(tmp_path)


def readelf_dynamic(path) -> dict:
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True).stdout
    pick = lambda tag, label: re.findall(rf"\({tag}\)\s+{label}: \[(.*)\]", out)  # noqa: E731
    return {
        "needed": tuple(pick("NEEDED", "Shared library")),
        "soname": (pick("SONAME", "Library soname") or [None])[0],
        "rpath": (pick("RPATH", "Library rpath") or [None])[0],
        "runpath": (pick("RUNPATH", "Library runpath") or [None])[0],
        "nodeflib": "NODEFLIB" in out,
    }


def test_reads_what_readelf_reads(b):
    path = b.lib(
        "d/libfull.so",
        soname="libfull.so.7",
        needed=["libone.so", "$ORIGIN/two.so", "libthree.so.3"],
        runpath="$ORIGIN:/opt/x",
        nodeflib=True,
    )
    info = read_elf(str(path))
    expected = readelf_dynamic(path)
    assert (info.needed, info.soname, info.rpath, info.runpath, info.nodeflib) == (
        expected["needed"],
        expected["soname"],
        expected["rpath"],
        expected["runpath"],
        expected["nodeflib"],
    )
    assert info.needed[:3] == ("libone.so", "$ORIGIN/two.so", "libthree.so.3") and info.nodeflib
    assert (info.elf_class, info.machine, info.e_type, info.little_endian) == (64, EM_X86_64, "ET_DYN", True)


def test_rpath_is_kept_raw_but_ignored_when_runpath_exists(b):
    only_rpath = read_elf(str(b.lib("d/librp.so", rpath="/r")))
    assert only_rpath.rpath == "/r" and only_rpath.runpath is None and only_rpath.effective_rpath == "/r"


def test_executable_has_its_interpreter(b):
    info = read_elf(str(b.exe("bin/prog", needed=["libx.so"])))
    assert info.interp == "/lib64/ld-linux-x86-64.so.2" and "libx.so" in info.needed


@pytest.mark.skipif(not gcc_m32_available(), reason="gcc -m32 cannot build a 32-bit object here")
def test_32_bit_file(b):
    info = read_elf(str(b.lib("d/lib32.so", soname="lib32.so", m32=True)))
    assert (info.elf_class, info.machine, info.soname) == (32, EM_386, "lib32.so")


def test_many_system_libraries_match_readelf():
    import glob

    files = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/*.so*"))[::7]
    compared = 0
    for path in files:
        try:
            info = read_elf(path)
        except ElfError:
            continue  # linker scripts such as libc.so
        expected = readelf_dynamic(path)
        assert (info.needed, info.soname, info.rpath, info.runpath) == (
            expected["needed"],
            expected["soname"],
            expected["rpath"],
            expected["runpath"],
        ), path
        compared += 1
    assert compared > 50


@pytest.mark.parametrize(
    "what, content",
    [
        ("empty", b""),
        ("text", b"INPUT(-lfoo)\n"),
        ("magic only", b"\x7fELF"),
        ("bad class", b"\x7fELF\x07\x01\x01" + b"\0" * 60),
    ],
)
def test_not_elf_is_one_error_naming_the_file(tmp_path, what, content):
    path = tmp_path / "libbad.so"
    path.write_bytes(content)
    with pytest.raises(ElfError) as caught:
        read_elf(str(path))
    message = str(caught.value)
    assert message.startswith(str(path) + ": ") and "\n" not in message


def test_directory_and_missing_and_unreadable(tmp_path):
    with pytest.raises(ElfError, match="is a directory"):
        read_elf(str(tmp_path))
    with pytest.raises(ElfError, match="no such file"):
        read_elf(str(tmp_path / "absent.so"))


def truncations(data: bytes) -> list[int]:
    """Cut points that land inside each part the reader needs: header, program headers, dynamic section, strings."""
    import struct

    phoff = struct.unpack_from("<Q", data, 32)[0]
    phnum = struct.unpack_from("<H", data, 56)[0]
    cuts = [0, 10, 40, 63, phoff + 20, phoff + phnum * 56 - 1]
    for index in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + index * 56)
        if p_type == 2:  # PT_DYNAMIC
            cuts += [p_offset + 8, p_offset + p_filesz // 2]
    return sorted(set(c for c in cuts if c < len(data)))


def test_truncated_copies_fail_with_one_line_naming_the_file(b, tmp_path):
    original = b.lib("d/libt.so", soname="libt.so", needed=["liba.so", "libb.so"], runpath="/somewhere")
    data = original.read_bytes()
    for cut in truncations(data):
        path = tmp_path / f"libcut{cut}.so"
        path.write_bytes(data[:cut])
        with pytest.raises(ElfError) as caught:
            read_elf(str(path))
        assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value), cut


def test_string_table_cut_off_is_an_error(b, tmp_path):
    original = b.lib("d/libs.so", soname="libs.so", needed=["libneeded-with-a-long-name.so"])
    data = original.read_bytes()
    cut = data.index(b"libneeded-with-a-long-name.so") + 5
    path = tmp_path / "libstrcut.so"
    path.write_bytes(data[:cut])
    with pytest.raises(ElfError, match="truncated|past the end|beyond"):
        read_elf(str(path))


def test_random_corruption_never_escapes_as_another_exception(b, tmp_path):
    original = b.lib("d/libr.so", soname="libr.so", needed=["liba.so"], runpath="$ORIGIN")
    data = bytearray(original.read_bytes())
    rng = random.Random(1234)
    path = tmp_path / "libfuzz.so"
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            position = rng.randrange(0, 0x400)  # header, program headers and (for this tiny file) the dynamic part
            mutated[position] = rng.randrange(256)
        path.write_bytes(bytes(mutated))
        try:
            read_elf(str(path))
            outcomes["ok"] += 1
        except ElfError as error:
            assert "\n" not in str(error) and str(error).startswith(str(path))
            outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0


@pytest.mark.parametrize("field", ["p_offset", "p_filesz"])
def test_absurd_sizes_in_program_headers_are_an_error_not_a_crash(b, tmp_path, field):
    """A corrupt PT_DYNAMIC/PT_INTERP offset or size (2**60) must not make the reader allocate it."""
    import struct

    original = b.lib("d/libhuge.so", soname="libhuge.so", needed=["liba.so"], runpath="$ORIGIN")
    data = bytearray(original.read_bytes())
    phoff, phnum = struct.unpack_from("<Q", data, 32)[0], struct.unpack_from("<H", data, 56)[0]
    where = {"p_offset": 8, "p_filesz": 32}[field]
    for index in range(phnum):
        if struct.unpack_from("<I", data, phoff + index * 56)[0] == 2:  # PT_DYNAMIC
            struct.pack_into("<Q", data, phoff + index * 56 + where, 1 << 60)
    path = tmp_path / "libhuge.so"
    path.write_bytes(bytes(data))
    with pytest.raises(ElfError, match="past the end of the file") as caught:
        read_elf(str(path))
    assert str(caught.value).startswith(f"{path}: PT_DYNAMIC")


def test_section_headers_are_never_read(b, tmp_path):
    """The loader ignores section headers, and so does the reader: with e_shoff pointing far past the end of the
    file (which pyelftools' ELFFile refuses), the dynamic information is still read. That is also why the cost does
    not grow with file size (speed itself is measured by bench/linkage.py, not asserted here)."""
    import struct

    from elftools.common.exceptions import ELFError as PyElfError
    from elftools.elf.elffile import ELFFile

    original = b.lib("d/libsh.so", soname="libsh.so", needed=["liba.so"])
    data = bytearray(original.read_bytes())
    struct.pack_into("<Q", data, 40, 1 << 40)  # e_shoff
    broken = tmp_path / "libsh.so"
    broken.write_bytes(bytes(data))
    with open(broken, "rb") as handle, pytest.raises((PyElfError, Exception)):
        ELFFile(handle).get_section(1)
    info = read_elf(str(broken))
    assert (info.soname, info.needed[0]) == ("libsh.so", "liba.so")


def _sparse(data: bytes, path, p_type: int, size: int):
    """`data` with the first program header of `p_type` claiming `size` bytes, written as a sparse file long enough
    to hold them (st_size really is that large; the disk holds only the original bytes)."""
    import struct

    data = bytearray(data)
    phoff, phnum = struct.unpack_from("<Q", data, 32)[0], struct.unpack_from("<H", data, 56)[0]
    for index in range(phnum):
        if struct.unpack_from("<I", data, phoff + index * 56)[0] == p_type:
            offset = struct.unpack_from("<Q", data, phoff + index * 56 + 8)[0]
            struct.pack_into("<Q", data, phoff + index * 56 + 32, size)
            break
    else:
        raise AssertionError(f"no program header of type {p_type}")
    path.write_bytes(bytes(data))
    with open(path, "r+b") as handle:
        handle.truncate(offset + size)
    return path


def _capped_ldd(path) -> subprocess.CompletedProcess:
    """`verify ldd PATH` with its address space capped at 1 GiB, as a hostile file must never need more."""
    import resource
    import sys

    from tests.support.venvs import REPO

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "verify", "ldd", str(path)],
        cwd=REPO,
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("size", [1 << 32, 1 << 36, 1 << 40], ids=["4GiB", "64GiB", "1TiB"])
@pytest.mark.parametrize("segment", ["PT_DYNAMIC", "PT_INTERP"])
def test_a_sparse_file_claiming_gigabytes_is_a_finding_not_a_memory_error(b, tmp_path, size, segment):
    """Issue 9 finding 6: a real sparse file (st_size really is 4 GiB … 1 TiB) whose PT_DYNAMIC or PT_INTERP claims
    all of it. Before the fix the reader allocated the claimed size: a MemoryError traceback (here, under a 1 GiB
    address-space cap), and gigabytes read as root."""
    if segment == "PT_DYNAMIC":
        original = b.lib("d/libsparse.so", soname="libsparse.so", needed=["liba.so"])
        limit = 1 << 20
    else:
        original = b.exe("d/sparse-exe")
        limit = 4096
    path = _sparse(original.read_bytes(), tmp_path / f"sparse-{segment}", 2 if segment == "PT_DYNAMIC" else 3, size)
    assert path.stat().st_size > size and path.stat().st_blocks * 512 < 1 << 20  # really sparse
    with pytest.raises(ElfError) as caught:
        read_elf(str(path))
    assert str(caught.value) == (
        f"{path}: {segment} at offset {caught.value.reason.split()[3]} claims {size} bytes, "
        f"more than any real one (limit {limit} bytes): corrupt or hostile, not read"
    )
    done = _capped_ldd(path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [f"verify ldd: {caught.value} (give an ELF executable or shared library)"]


def test_a_sparse_library_among_the_dependencies_is_a_finding_of_the_analysis(b, tmp_path):
    (tmp_path / "lib").mkdir()
    _sparse(b.lib("d/libsparse.so", soname="libsparse.so").read_bytes(), tmp_path / "lib/libsparse.so", 2, 1 << 36)
    exe = b.exe("bin/uses-sparse", needed=["libsparse.so"], runpath=str(tmp_path / "lib"))
    done = _capped_ldd(exe)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "\tlibsparse.so => error: " in done.stdout and "claims 68719476736 bytes" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "kind, words",
    [
        ("fifo", "is a FIFO (a named pipe: opening it would block), not a regular file"),
        ("chardev", "is a character device, not a regular file"),
        ("symlink to /dev/zero", "is a character device, not a regular file"),
        ("socket", "is a socket, not a regular file"),
        ("directory", "is a directory, not an ELF file"),
    ],
)
def test_a_file_that_is_not_regular_is_never_read_and_is_one_error(tmp_path, kind, words):
    """Issue 9 finding 5: a FIFO where a library should be blocked the reader (as root) for ever."""
    import os

    from tests.support.hostile_files import fifo_readers, plant

    if kind == "chardev" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    path = plant(tmp_path / "libbitsandbytes_rocm72.so", kind)
    with fifo_readers(path) as opened, pytest.raises(ElfError) as caught:
        read_elf(str(path))
    assert opened.count == 0, "the reader opened the FIFO (and would have waited for a writer for ever)"
    assert str(caught.value) == f"{path}: {words}" and caught.value.not_regular


def test_the_numbers_this_module_names_are_pyelftools_and_the_gabis():
    from elftools.elf.enums import ENUM_E_MACHINE, ENUM_P_TYPE_BASE

    from verify.ld import elf

    assert (elf.EM_X86_64, elf.EM_386) == (ENUM_E_MACHINE["EM_X86_64"], ENUM_E_MACHINE["EM_386"])
    assert (elf._PT_LOAD, elf._PT_DYNAMIC, elf._PT_INTERP) == tuple(
        ENUM_P_TYPE_BASE[name] for name in ("PT_LOAD", "PT_DYNAMIC", "PT_INTERP")
    )


def test_pyelftools_is_imported_on_the_first_parse_not_with_the_module(b):
    """Issue 12: the strays scan (the deploy's strays fact, the apt hook) imports this module for its types and, on a
    host with no stray library, parses no file — importing pyelftools was half of its CPU."""
    library = b.lib("d/liblazy.so", soname="liblazy.so")
    program = (
        "import sys\n"
        "import verify.debian.strays, verify.ld.fsview, verify.ld.elf as elf\n"
        "assert not [m for m in sys.modules if m.startswith('elftools')], 'imported with the module'\n"
        "assert elf.read_elf(sys.argv[1]).soname == 'liblazy.so'\n"
        "assert 'elftools.elf.structs' in sys.modules\n"
    )
    subprocess.run(
        [sys.executable, "-I", "-c", program, str(library)], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)}
    )
