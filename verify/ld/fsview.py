"""The analysed system's files, seen from here: this machine's `/`, or a filesystem image under `--root DIR`.

With a root, every path is the *image's* path: it is looked up under DIR, and symlinks are followed inside the image
(an absolute target is re-rooted at DIR, `..` never climbs above it), the way the loader would see them if DIR were
`/`. Directory listings, path resolutions and ELF parses are cached: one analysis asks for the same few directories
(each with a dozen hwcaps subdirectories) thousands of times, and the same file under several names.

Two kinds of path meet here: an *image path* is what the analysed system calls a file (`/opt/rocm/lib/…`, also with
a root), a *local path* is where that file opens on this machine (`DIR/opt/rocm-7.2.4/lib/…`). Every translation
between them is a method of this class — `host_path`/`local` (image → local), `real_path` (image → canonical image
path), `image_path` (local → image) — and `verify check` makes one view per run and passes it along.

Files are opened through verify/safe_read.py (regular files only, never blocking; under a root, the already resolved
path is opened without following a link, which would leave the image), and listings count against its time limit.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_module
from pathlib import Path, PurePosixPath

from verify.ld.elf import ElfError, ElfInfo, read_elf
from verify.safe_read import listdir

_MAX_LINKS = 40  # like the kernel's ELOOP limit


class FileSystemView:
    def __init__(self, root: str = "/", cwd: str | None = None):
        root = os.path.abspath(root)
        self.root = "" if root == "/" else root
        # The analysed process's working directory (for relative names and empty path elements).
        self.cwd = cwd if cwd is not None else (os.getcwd() if not self.root else "/")
        self._listings: dict[str, frozenset[str] | None] = {}
        self._listings_by_inode: dict[tuple[int, int], frozenset[str]] = {}
        self._resolved: dict[str, str | None] = {}
        self._elf: dict[tuple[int, int], ElfInfo | ElfError] = {}
        self._places: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, frozenset[str]], ...]] = {}

    @property
    def is_host(self) -> bool:
        return not self.root

    def absolute(self, path: str) -> str:
        """`path` made absolute against the analysed process's working directory (no normalisation)."""
        return path if path.startswith("/") else posixpath.join(self.cwd, path)

    def host_path(self, path: str) -> str | None:
        """Where `path` of the analysed system can be opened here (None: it does not resolve inside the image)."""
        if not self.root:
            return path if path.startswith("/") else self.absolute(path)
        path = self.absolute(path)
        if path in self._resolved:
            return self._resolved[path]
        resolved = self._resolve(path)
        self._resolved[path] = resolved
        return resolved

    def local(self, path: str | os.PathLike) -> Path:
        """`host_path` as a Path that is never None: a path that does not resolve inside the image (a symlink loop) is
        joined to the root as it is, so that opening it fails like opening any missing file."""
        path = os.fspath(path)
        if not self.root:
            return Path(path)
        found = self.host_path(path)
        if found is not None:
            return Path(found)
        return Path(self.root) / path.lstrip("/")

    def real_path(self, path: str) -> str:
        """The canonical image path of `path`: every symlink resolved (inside the image)."""
        if not self.root:
            return posixpath.realpath(self.absolute(path))
        found = self.host_path(path)
        if found is None:
            return posixpath.normpath(self.absolute(path))
        return found[len(self.root) :] or "/"

    def image_path(self, local: str | os.PathLike) -> str:
        """The image path of a local path under the root (the inverse of `local` for a path already resolved)."""
        if not self.root:
            return os.fspath(local)
        return "/" + str(PurePosixPath(os.fspath(local)).relative_to(self.root))

    @property
    def image_root(self) -> str:
        """The analysed system's root directory on this machine ("/" for this machine itself)."""
        return self.root or "/"

    def _resolve(self, path: str) -> str | None:
        todo = path.split("/")
        todo.reverse()
        current = ""
        links = 0
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                current = current.rsplit("/", 1)[0]
                continue
            candidate = f"{current}/{part}"
            host = self.root + candidate
            try:
                target = os.readlink(host)
            except OSError:  # not a link (or absent): keep walking; absence shows when it is opened
                current = candidate
                continue
            links += 1
            if links > _MAX_LINKS:
                return None
            if target.startswith("/"):
                current = ""
            parts = target.split("/")
            parts.reverse()
            todo.extend(parts)
        return self.root + (current or "/")

    def listing(self, directory: str) -> frozenset[str] | None:
        """Names in `directory` ('' is the working directory), or None when it is not a readable directory."""
        cached = self._listings.get(directory, False)
        if cached is not False:
            return cached
        host = self.host_path(directory)
        names = None
        if host:
            try:
                # Listed once per directory, not per path: /lib/x86_64-linux-gnu is /usr/lib/x86_64-linux-gnu on a
                # merged-/usr system, and $ORIGIN/../.. paths reach the same venv directories under several names.
                st = os.stat(host)
                names = self._listings_by_inode.get((st.st_dev, st.st_ino))
                if names is None:
                    names = self._listings_by_inode[st.st_dev, st.st_ino] = frozenset(listdir(host))
            except OSError:
                names = None
        self._listings[directory] = names
        return names

    def search_places(self, directory: str, subdirs: tuple[str, ...]) -> tuple[tuple[str, frozenset[str]], ...]:
        """For a search directory (glibc form: '' or ending in '/'): (subdir, its file names) for each of `subdirs`
        that exists there, in order. Most directories have none of the hwcaps subdirectories, so a search tests a name
        against one or two listings instead of trying every subdirectory."""
        key = (directory, subdirs)
        places = self._places.get(key)
        if places is None:
            found = []
            top = self.listing(directory[:-1] if len(directory) > 1 and directory.endswith("/") else directory)
            for subdir in subdirs if top else ():
                # Only subdirectories whose first component exists are listed.
                if subdir and subdir.split("/", 1)[0] not in top:
                    continue
                where = directory + subdir
                names = self.listing(where[:-1] if len(where) > 1 and where.endswith("/") else where) if subdir else top
                if names:
                    found.append((subdir, names))
            places = self._places[key] = tuple(found)
        return places

    def exists_in(self, directory: str, name: str) -> bool:
        names = self.listing(directory)
        return names is not None and name in names

    def stat(self, path: str) -> os.stat_result | None:
        host = self.host_path(path)
        if host is None:
            return None
        try:
            return os.stat(host)
        except OSError:
            return None

    def is_dir(self, path: str) -> bool:
        found = self.stat(path)
        return found is not None and stat_module.S_ISDIR(found.st_mode)

    def elf(self, path: str, st: os.stat_result | None = None) -> ElfInfo:
        """Parse `path` once per file (by st_dev/st_ino); raises ElfError (cached too) for what cannot be read."""
        if st is None:
            st = self.stat(path)
            if st is None:
                raise ElfError(path, "no such file")
        key = (st.st_dev, st.st_ino)
        cached = self._elf.get(key)
        if cached is None:
            if stat_module.S_ISDIR(st.st_mode):
                cached = ElfError(path, "is a directory, not an ELF file")
            else:
                try:
                    cached = read_elf(path, opened_path=self.host_path(path), follow=self.is_host)
                except ElfError as error:
                    cached = error
            self._elf[key] = cached
        if isinstance(cached, ElfError):
            raise cached
        return cached
