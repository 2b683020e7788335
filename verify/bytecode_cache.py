"""Compiled code for the verifier's archive (verify.pyz), kept by root between runs on a host.

Python compiles every module it imports from a zip archive again on every run: zipimport reads byte-code from the
archive but never writes any. The verifier runs from verify.pyz, so each `verify check` spent ~0.13 s of a local
fleet host's CPU compiling (0.23 s for its static part, 0.10 s with the modules compiled), and each `verify strays`
(asked by every deploy) ~25 ms of its 65 ms. The apt hook runs an unpacked, byte-compiled copy instead
(roles/apt_hook/model.py); the archive, run by the deploy's stages and the boot check, uses this.

`use_cache()` (the archive's __main__, before anything else is imported) puts a finder in front of Python's own: a
module of the archive is loaded from `bytecode/` beside the archive when an entry for it is there, and otherwise
compiled from the archive exactly as zipimport compiles it, the code then written there for the next run. An entry
is named by the module, the interpreter's cache tag and a checksum of the module's source as the archive holds it
(size, CRC-32, Adler-32), so a new archive or another python3 never runs an old entry; it starts with the
interpreter's magic number and holds the marshalled code, and its file name inside the code must be the module's own.

Only root's, and only where no other account could have written it: nothing is read or written unless the process
runs as root, the archive's directory belongs to root and no one else may write it, and `bytecode/` is root's own
directory (mode 0700, not a symbolic link). An entry is read only if it is a regular file of root's with no
permission for anyone else, opened without following a symbolic link, at most MAX_ENTRY bytes. Anything else —
another account, a missing, foreign or corrupt entry, a full disk, a read-only file system, `python3 -B` — means
the module is compiled from the archive, as without this module: the cache makes a run faster, never different,
and never makes it fail.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import types
import zipimport
import zlib
from importlib.machinery import ModuleSpec
from importlib.util import MAGIC_NUMBER  # runpy, which runs the archive, has imported importlib.util already

DIRECTORY = "bytecode"
PACKAGES = ("verify", "elftools")  # what the archive holds (roles/verifier.py zipapp_bytes)
MAX_ENTRY = 8 << 20  # the largest module's code is ~100 kB
MAX_ENTRIES = 2000  # about twenty archives' worth; past this the directory is emptied before the next write


def use_cache() -> bool:
    """Load the archive's modules through the cache, where it may be used (see the module docstring): True if so."""
    loader = getattr(__spec__, "loader", None)
    if not isinstance(loader, zipimport.zipimporter) or os.geteuid() != 0:
        return False  # run from a checkout (python -m verify), or not as root
    directory = _open_directory(os.path.dirname(loader.archive))
    if directory is None:
        return False
    sys.meta_path.insert(0, _Finder(loader.archive, directory))
    return True


def entry_name(module: str, source: bytes) -> str:
    """The file name of `module`'s entry for this interpreter and this source."""
    checksum = f"{len(source):x}-{zlib.crc32(source):08x}{zlib.adler32(source):08x}"
    return f"{module}.{sys.implementation.cache_tag}.{checksum}"


def _open_directory(parent: str) -> int | None:
    """A descriptor of parent/bytecode, created if need be, or None where it must not be used."""
    try:
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(parent_fd)
        if found.st_uid != 0 or found.st_mode & 0o022:
            return None  # another account could replace the cache directory itself
        try:
            os.mkdir(DIRECTORY, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        fd = os.open(DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return None
    finally:
        os.close(parent_fd)
    found = os.fstat(fd)
    if found.st_uid != 0 or stat.S_IMODE(found.st_mode) & 0o077:
        os.close(fd)
        return None
    return fd


class _Finder:
    """In sys.meta_path: the archive's own modules get a loader that uses the cache; others are left to Python.

    The spec is made here, not by zipimport's find_spec: that one works out the module's file name by compiling it
    (zipimporter.get_filename), and its loader compiles it once more to run it — every module twice, on every run."""

    def __init__(self, archive: str, directory: int) -> None:
        self.archive = archive
        self.directory = directory
        self._importers: dict[str, zipimport.zipimporter] = {}  # one per package directory, as Python keeps them

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in PACKAGES:
            return None
        for entry in [self.archive] if path is None else path:
            if not isinstance(entry, str) or (entry != self.archive and not entry.startswith(self.archive + "/")):
                continue
            try:
                importer = self._importers.get(entry) or self._importers.setdefault(entry, zipimport.zipimporter(entry))
                package = importer.is_package(name)  # a look-up in the archive's table of contents
            except zipimport.ZipImportError:
                continue
            filename = f"{self.archive}/{importer.prefix}{name.rpartition('.')[2]}" + (
                "/__init__.py" if package else ".py"
            )
            spec = ModuleSpec(name, _Loader(importer, self.directory, filename), origin=filename, is_package=package)
            spec.has_location = True  # __file__, as zipimport's spec gives it
            if package:  # __path__: the package's directory in the archive, as zipimport's spec gives it
                spec.submodule_search_locations = [filename.rpartition("/")[0]]
            return spec
        return None  # not in the archive: Python's own finders decide

    def invalidate_caches(self) -> None:
        pass


class _Loader:
    """A loader for one module of the archive, its code from the cache. Everything else (get_source for tracebacks,
    get_resource_reader for importlib.resources, is_package …) is zipimport's own."""

    def __init__(self, inner: zipimport.zipimporter, directory: int, filename: str) -> None:
        self._inner = inner
        self._directory = directory
        self._filename = filename

    def __getattr__(self, attribute):
        return getattr(self._inner, attribute)

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        exec(self.get_code(module.__spec__.name), module.__dict__)

    def get_filename(self, name: str) -> str:
        return self._filename

    def get_code(self, name: str) -> types.CodeType:
        try:
            source = self._inner.get_data(self._filename)
        except OSError:  # no source in the archive (byte-code only): zipimport's own way
            return self._inner.get_code(name)
        # As zipimport compiles it (_compile_source): the source's bytes, \r\n made \n, compiled with dont_inherit.
        source = source.replace(b"\r\n", b"\n")
        entry = entry_name(name, source)
        code = self._read(entry, self._filename)
        if code is None:
            code = compile(source, self._filename, "exec", dont_inherit=True)
            if not sys.dont_write_bytecode:
                self._write(entry, code)
        return code

    def _read(self, entry: str, filename: str) -> types.CodeType | None:
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._directory)
        except OSError:
            return None
        try:
            found = os.fstat(fd)
            if (
                not stat.S_ISREG(found.st_mode)
                or found.st_uid != 0
                or stat.S_IMODE(found.st_mode) & 0o077
                or found.st_size > MAX_ENTRY
            ):
                return None
            data = os.read(fd, MAX_ENTRY + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) != found.st_size or not data.startswith(MAGIC_NUMBER):
            return None
        try:
            code = marshal.loads(data[len(MAGIC_NUMBER) :])
        except (EOFError, ValueError, TypeError):
            return None
        return code if isinstance(code, types.CodeType) and code.co_filename == filename else None

    def _write(self, entry: str, code: types.CodeType) -> None:
        """Write the entry whole under a private name, then rename it into place; give up quietly on any error."""
        partial = f".{entry}.{os.urandom(8).hex()}"
        try:
            if len(os.listdir(self._directory)) >= MAX_ENTRIES:
                for name in os.listdir(self._directory):
                    os.unlink(name, dir_fd=self._directory)
            fd = os.open(
                partial,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=self._directory,
            )
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(MAGIC_NUMBER + marshal.dumps(code))
                os.rename(partial, entry, src_dir_fd=self._directory, dst_dir_fd=self._directory)
            except BaseException:
                os.unlink(partial, dir_fd=self._directory)
                raise
        except OSError:
            pass
