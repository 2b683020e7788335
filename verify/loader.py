"""A static model of glibc's dynamic loader (elf/dl-load.c, elf/dl-deps.c, elf/dl-open.c as of 2.36).

`Loader` keeps what ld.so keeps — the list of loaded objects with the names each was opened under, its SONAME, its
file identity and the object that caused it to be loaded (l_loader) — and answers each request the way
`_dl_map_object` does:

0. already loaded: the name equals an object's path or a name it was requested under, or its DT_SONAME;
1. a name with '/': that path ($ORIGIN/$LIB/$PLATFORM expanded with the requester), no search;
2. only if the requester has no DT_RUNPATH: DT_RPATH of the requester, of its l_loader, … up the chain (objects with
   DT_RUNPATH contribute nothing: glibc drops their DT_RPATH), then the executable's DT_RPATH;
3. LD_LIBRARY_PATH (':' or ';' separated, DSTs expanded with the executable);
4. the requester's own DT_RUNPATH (never inherited);
5. ld.so.cache (cached entries under the system directories are refused for a -z nodefaultlib requester; a cached
   path that cannot be opened, or is of the wrong class, falls through);
6. the system directories, unless the requester is -z nodefaultlib.
Every directory is tried as its glibc-hwcaps and legacy hwcap subdirectories first (LoaderPlatform.subdirs); within
one list a directory is searched once; a file of the wrong ELF class or machine is skipped and the search goes on; a
file that is not loadable ELF at all stops the load with an error, as in glibc. A file found whose (st_dev, st_ino)
is already loaded is that object. Dependencies load breadth-first. dlopen: the caller's paths are searched (a name
without '/'), but the new object's l_loader is NULL (glibc's __RTLD_CALLMAP), so its dependencies start a fresh
RPATH chain.

Not modelled: LD_PRELOAD, /etc/ld.so.preload, auditing, DT_AUXILIARY/DT_FILTER, setuid restrictions, tunables,
namespaces (dlmopen), and the unloading of a failed dlopen (here a dlopen with missing dependencies stays loaded, as
ldd's trace mode keeps it).
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple

from verify import image as m
from verify.elf import ElfError, ElfInfo
from verify.fsview import FileSystemView
from verify.ldcache import LdCache
from verify.platform import LoaderPlatform

_ELF64_EHDR_SIZE = 64


class _Object:
    """glibc's struct link_map, reduced to what the search needs (mutable while the model runs; a plain class, as
    thousands are made per venv)."""

    __slots__ = ("path", "info", "names", "requested_as", "how", "via", "origin", "file_id", "loader",
                 "requested_by", "dlopened", "has_searchlist", "paths")

    def __init__(self, path: str, info: ElfInfo | None, names: list[str], requested_as: str, how: str, via: str,
                 origin: str | None, *, file_id: tuple[int, int] | None = None, loader: _Object | None = None,
                 requested_by: _Object | None = None, dlopened: bool = False, has_searchlist: bool = False):
        self.path = path  # l_name: where it was opened, not symlink-resolved
        self.info = info
        self.names = names  # l_libname: every name it was requested under
        self.requested_as = requested_as
        self.how = how
        self.via = via
        self.origin = origin  # l_origin, for $ORIGIN
        self.file_id = file_id  # (st_dev, st_ino)
        self.loader = loader  # l_loader: whose RPATH chain its dependencies inherit
        self.requested_by = requested_by
        self.dlopened = dlopened
        self.has_searchlist = has_searchlist  # the main program and dlopen roots: a later dlopen maps nothing new
        self.paths: dict[str, tuple[str, ...]] = {}  # decomposed RPATH/RUNPATH, computed once

    @property
    def soname(self) -> str | None:
        return self.info.soname if self.info else None

    def public(self) -> m.LoadedObject:
        info = self.info
        return m.fast_new(
            m.LoadedObject,
            path=self.path,
            requested_as=self.requested_as,
            how=self.how,
            via=self.via,
            requested_by=self.requested_by.path if self.requested_by else None,
            loader=self.loader.path if self.loader else None,
            dlopened=self.dlopened,
            soname=info.soname if info else None,
            needed=info.needed if info else (),
            rpath=info.rpath if info else None,
            runpath=info.runpath if info else None,
            names=tuple(self.names),
        )


class _Hit(NamedTuple):
    path: str
    directory: str
    info: ElfInfo
    file_id: tuple[int, int]


class _FatalLoadError(Exception):
    """The loader would stop here (glibc's `lose`): a file in the way that is not loadable ELF."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def display_dir(directory: str) -> str:
    """glibc keeps search directories with a trailing '/', and '' for the working directory."""
    if directory == "":
        return "."
    return directory[:-1] if len(directory) > 1 and directory.endswith("/") else directory


class Loader:
    def __init__(
        self,
        platform: LoaderPlatform,
        fs: FileSystemView,
        cache: LdCache | None,
        *,
        conf_dirs: tuple[str, ...] | None = None,
        library_path: str | None = None,
    ):
        self.platform = platform
        self.fs = fs
        self.cache = cache
        self.conf_dirs = tuple(d if d.endswith("/") else d + "/" for d in conf_dirs) if conf_dirs else None
        self._library_path = library_path
        self._env_dirs: tuple[str, ...] | None = None
        self.main: _Object | None = None
        self.interpreter: _Object | None = None
        self._interpreter_placed = False
        self.objects: list[_Object] = []
        self.requests: list[m.Request] = []
        self.findings: list[m.Finding] = []
        self._by_file: dict[tuple[int, int], _Object] = {}
        self._by_name: dict[str, _Object] = {}
        self._by_soname: dict[str, _Object] = {}
        self._system_prefixes = tuple(d.rstrip("/") + "/" for d in platform.system_dirs)

    # --- the process -------------------------------------------------------------------------------------------------

    def start(self, path: str, *, info: ElfInfo, executed: bool) -> None:
        """Map the main program and its dependencies, as ld.so does at start-up.

        `executed`: the kernel started it (a real process: $ORIGIN is the directory of the symlink-resolved
        executable, via /proc/self/exe); otherwise ld.so loads it by the path given, as `ldd FILE` does.
        """
        st = self.fs.stat(path)
        if executed:
            real = self._real_path(path)
            origin = _dirname(real)
            names: list[str] = []
        else:
            origin = _dirname(self.fs.absolute(path))
            names = [path]
        self.main = _Object(path, info, names, path, m.MAIN_PROGRAM, m.MAIN_PROGRAM, origin,
                            file_id=(st.st_dev, st.st_ino) if st and not executed else None, has_searchlist=True)
        self.objects.append(self.main)
        if executed:  # the kernel-loaded program is known by no name and no file identity (its l_name is "")
            if self.main.soname is not None:
                self._by_soname[self.main.soname] = self.main
        else:
            self._register(self.main)
        interp = info.interp or self.platform.interpreter
        interp_st = self.fs.stat(interp)
        self.interpreter = _Object(interp, None, [interp], interp, m.INTERPRETER, m.INTERPRETER, _dirname(interp),
                                   file_id=(interp_st.st_dev, interp_st.st_ino) if interp_st else None)
        try:
            self.interpreter.info = self.fs.elf(interp, interp_st) if interp_st else None
        except ElfError:
            self.interpreter.info = None
        self._by_name.setdefault(interp, self.interpreter)
        self._by_soname.setdefault(self.platform.interpreter_soname, self.interpreter)
        if self.interpreter.file_id:
            self._by_file.setdefault(self.interpreter.file_id, self.interpreter)
        self._load_dependencies(self.main)

    def dlopen(self, name: str, caller: _Object | None = None) -> _Object | None:
        """dlopen(name) called from code in `caller` (default: the main program)."""
        caller = caller or self.main
        obj, new = self._request(name, caller, "dlopen")
        if obj is None:
            return None
        if new or not obj.has_searchlist:
            obj.has_searchlist = True
            self._load_dependencies(obj)
        return obj

    def object_for_path(self, path: str) -> _Object | None:
        for obj in self.objects:
            if obj.path == path:
                return obj
        st = self.fs.stat(path)
        return self._by_file.get((st.st_dev, st.st_ino)) if st else None

    # --- breadth-first loading (elf/dl-deps.c) -----------------------------------------------------------------------

    def _load_dependencies(self, root: _Object) -> None:
        queue = [root]
        queued = {id(root)}
        index = 0
        while index < len(queue):
            obj = queue[index]
            index += 1
            if obj.info is None:
                continue
            for name in obj.info.needed:
                dep, _ = self._request(name, obj, "needed")
                if dep is None or id(dep) in queued:
                    continue
                if dep is self.interpreter and not self._interpreter_placed:
                    # rtld.c puts the interpreter's map right after the object reached before it (what ldd shows).
                    self.objects.insert(self.objects.index(queue[-1]) + 1, dep)
                    self._interpreter_placed = True
                queued.add(id(dep))
                queue.append(dep)

    # --- one request (_dl_map_object) --------------------------------------------------------------------------------

    def _request(self, name: str, requester: _Object | None, kind: str) -> tuple[_Object | None, bool]:
        if kind == "needed" and "$" in name:
            # elf/dl-deps.c expands DSTs in DT_NEEDED before anything else: the expanded name is what is looked up
            # (and what ldd prints); an expansion that comes out empty is an error.
            expanded = self._expand(name, requester)
            if not expanded:
                self._record(name, requester, kind, m.ERROR,
                             error=f"{name}: empty dynamic string token substitution (needed by "
                                   f"{requester.path if requester else 'the program'})")
                return None, False
            name = expanded
        loaded, matched_by = self._lookup_loaded(name)
        if loaded is not None:
            self._record(name, requester, kind, m.ALREADY_LOADED, path=loaded.path, matched_by=matched_by)
            return loaded, False

        searched: list[m.SearchStep] = []
        skipped: list[str] = []
        step: m.SearchStep | None = None
        try:
            if "/" in name:
                realname = self._expand(name, requester) if requester else name
                hit = None
                if realname:
                    found = self._open(realname, skipped)
                    hit = _Hit(realname, _dirname(realname), *found) if found else None
            else:
                hit, step = self._search(name, requester, searched, skipped)
        except _FatalLoadError as error:
            self._record(name, requester, kind, m.ERROR, searched=searched, skipped=skipped, error=str(error))
            self.findings.append(m.Finding(error.path, f"{error.path}: {error.reason}"))
            return None, False

        if hit is None:
            self._record(name, requester, kind, m.NOT_FOUND, searched=searched, skipped=skipped)
            return None, False

        same = self._by_file.get(hit.file_id)
        if same is not None:
            if name not in same.names:
                same.names.append(name)
                self._by_name.setdefault(name, same)
            self._record(name, requester, kind, m.ALREADY_LOADED, path=same.path, matched_by=m.BY_FILE,
                         found_via=step, found_in=display_dir(hit.directory), searched=searched, skipped=skipped)
            return same, False

        dlopened = kind == "dlopen"
        obj = _Object(
            path=hit.path,
            info=hit.info,
            names=[name],
            requested_as=name,
            how=step.kind if step else m.DIRECT_PATH,
            via=step.label if step else m.DIRECT_PATH,
            origin=_dirname(self.fs.absolute(hit.path)),
            file_id=hit.file_id,
            # glibc's __RTLD_CALLMAP: a dlopen'ed object has no l_loader, whoever called dlopen.
            loader=None if dlopened else requester,
            requested_by=requester,
            dlopened=dlopened,
        )
        self.objects.append(obj)
        self._register(obj)
        self._record(name, requester, kind, m.LOADED, path=obj.path, found_via=step,
                     found_in=display_dir(hit.directory), searched=searched, skipped=skipped)
        return obj, True

    def _lookup_loaded(self, name: str) -> tuple[_Object | None, str | None]:
        obj = self._by_name.get(name)
        if obj is not None:
            return obj, m.BY_NAME
        obj = self._by_soname.get(name)
        if obj is not None:
            obj.names.append(name)  # glibc caches the SONAME as a name of the object (l_soname_added)
            self._by_name.setdefault(name, obj)
            return obj, m.BY_SONAME
        return None, None

    def _register(self, obj: _Object) -> None:
        """Index a newly loaded object by its path, names and SONAME (the earliest loaded object wins a tie)."""
        for name in (obj.path, *obj.names):
            self._by_name.setdefault(name, obj)
        if obj.soname is not None:
            self._by_soname.setdefault(obj.soname, obj)
        if obj.file_id is not None:
            self._by_file.setdefault(obj.file_id, obj)

    def _record(self, name, requester, kind, outcome, **fields) -> None:
        if "searched" in fields:
            fields["searched"] = tuple(fields["searched"])
        if "skipped" in fields:
            fields["skipped"] = tuple(fields["skipped"])
        self.requests.append(m.fast_new(m.Request, name=name, requester=requester.path if requester else None,
                                        kind=kind, outcome=outcome, **fields))

    # --- the search ---------------------------------------------------------------------------------------------------

    def _search(self, name: str, requester: _Object | None, searched: list, skipped: list):
        main = self.main
        if requester is None or requester.info is None or requester.info.runpath is None:
            did_main = False
            chain = requester
            while chain is not None:
                dirs = self._dirs(chain, "rpath")
                if dirs:
                    kind = m.RPATH if chain is requester else m.RPATH_INHERITED
                    hit = self._try(name, dirs, self._step(kind, dirs, chain.path), searched, skipped)
                    if hit[0]:
                        return hit
                    did_main |= chain is main
                chain = chain.loader
            if not did_main and main is not None:
                dirs = self._dirs(main, "rpath")
                if dirs:
                    step = self._step(m.RPATH_EXECUTABLE, dirs, main.path)
                    hit = self._try(name, dirs, step, searched, skipped)
                    if hit[0]:
                        return hit

        env_dirs = self._library_path_dirs()
        if env_dirs:
            hit = self._try(name, env_dirs, self._step(m.LD_LIBRARY_PATH, env_dirs), searched, skipped)
            if hit[0]:
                return hit

        if requester is not None:
            dirs = self._dirs(requester, "runpath")
            if dirs:
                hit = self._try(name, dirs, self._step(m.RUNPATH, dirs, requester.path), searched, skipped)
                if hit[0]:
                    return hit

        flags_owner = requester or main
        nodeflib = bool(flags_owner and flags_owner.info and flags_owner.info.nodeflib)
        if self.cache is not None:
            cached = self.cache.lookup(name, self.platform)
            if cached is not None and nodeflib and cached.startswith(self._system_prefixes):
                cached = None
            step = self._step(m.LD_SO_CACHE, (self.cache.path,) + ((cached,) if cached else ()), shown=True)
            searched.append(step)
            if cached is not None:
                found = self._open(cached, skipped)
                if found:
                    return _Hit(cached, _dirname(cached), *found), step
        elif self.conf_dirs:
            dirs = self.conf_dirs
            if nodeflib:
                dirs = tuple(d for d in dirs if not d.startswith(self._system_prefixes))
            hit = self._try(name, dirs, self._step(m.LD_SO_CONF, dirs), searched, skipped)
            if hit[0]:
                return hit

        if not nodeflib:
            dirs = self._system_dirs()
            hit = self._try(name, dirs, self._step(m.SYSTEM_DIRS, dirs), searched, skipped)
            if hit[0]:
                return hit
        return None, None

    def _step(self, kind: str, dirs: tuple[str, ...], owner: str | None = None, *, shown: bool = False) -> m.SearchStep:
        """SearchSteps are immutable and the same few recur in every request: make each once per run."""
        memo = self.fs.step_memo
        key = (kind, dirs, owner)
        step = memo.get(key)
        if step is None:
            step = memo[key] = m.SearchStep(kind, dirs if shown else _shown(dirs), owner)
        return step

    def _try(self, name: str, dirs: tuple[str, ...], step: m.SearchStep, searched: list, skipped: list):
        searched.append(step)
        hit = self._open_path(name, dirs, skipped)
        return (hit, step) if hit else (None, None)

    def _open_path(self, name: str, dirs: tuple[str, ...], skipped: list) -> _Hit | None:
        """glibc's open_path over one directory list (memoised per name and list: the answer depends only on files)."""
        memo = self.fs.search_memo
        key = (name, dirs)
        answer = memo.get(key)
        if answer is None:
            found_skips: list[str] = []
            try:
                answer = (self._walk(name, dirs, found_skips), tuple(found_skips), None)
            except _FatalLoadError as error:
                answer = (None, tuple(found_skips), error)
            memo[key] = answer
        hit, skips, fatal = answer
        skipped.extend(skips)
        if fatal is not None:
            raise fatal
        return hit

    def _walk(self, name: str, dirs: tuple[str, ...], skipped: list) -> _Hit | None:
        subdirs = self.platform.subdirs
        for directory in dirs:
            for subdir in self.fs.subdir_index(directory, subdirs).get(name, ()):
                where = directory + subdir
                found = self._open(where + name, skipped)
                if found:
                    return _Hit(where + name, where, *found)
        return None

    def _open(self, path: str, skipped: list) -> tuple[ElfInfo, tuple[int, int]] | None:
        """glibc's open_verify: the file's info, None to go on searching, or _FatalLoadError (memoised per path for
        the run, like the directory listings: the same cached libc path is opened for nearly every analysis)."""
        memo = self.fs.open_memo
        answer = memo.get(path)
        if answer is None:
            found_skips: list[str] = []
            try:
                answer = (self._verify(path, found_skips), tuple(found_skips), None)
            except _FatalLoadError as error:
                answer = (None, tuple(found_skips), error)
            memo[path] = answer
        found, skips, fatal = answer
        skipped.extend(skips)
        if fatal is not None:
            raise fatal
        return found

    def _verify(self, path: str, skipped: list) -> tuple[ElfInfo, tuple[int, int]] | None:
        st = self.fs.stat(path)
        if st is None:
            return None  # absent, a dangling symlink, or outside the image
        try:
            info = self.fs.elf(path, st)
        except ElfError as error:
            reason = self._classify_unreadable(error)
            if reason is None:
                skipped.append(f"{path} (wrong ELF class)")
                return None
            raise _FatalLoadError(path, reason) from None
        problem = self._incompatibility(info)
        if problem is None:
            return info, (st.st_dev, st.st_ino)
        skip, reason = problem
        if skip:
            skipped.append(f"{path} ({reason})")
            return None
        raise _FatalLoadError(path, reason)

    def _classify_unreadable(self, error: ElfError) -> str | None:
        """glibc's message for a file pyelftools could not read, or None where glibc would skip it (other class)."""
        head = error.head
        if "is a directory" in error.reason:
            return "cannot read file data (it is a directory)"
        if len(head) < _ELF64_EHDR_SIZE:
            return "file too short"
        if head[:4] != b"\x7fELF":
            return "invalid ELF header"
        if head[4] != (2 if self.platform.elf_class == 64 else 1):
            return None
        return error.reason

    def _incompatibility(self, info: ElfInfo) -> tuple[bool, str] | None:
        """(skip?, reason) in open_verify's order, or None when the loader accepts the file."""
        if info.elf_class != self.platform.elf_class:
            return True, f"wrong ELF class: ELFCLASS{info.elf_class}"
        if not info.little_endian:
            return False, "ELF file data encoding not little-endian"
        if info.ident_version != 1:
            return False, "ELF file version ident does not match current one"
        if info.osabi not in (0, 3):  # SYSV, GNU
            return False, "ELF file OS ABI invalid"
        if info.abiversion != 0 and not (info.osabi == 3 and info.abiversion < 4):
            return False, "ELF file ABI version invalid"
        if not info.ident_padding_zero:
            return False, "nonzero padding in e_ident"
        if info.version != 1:
            return False, "ELF file version does not match current one"
        if info.machine != self.platform.machine:
            return True, f"wrong machine {info.machine_name}"
        if info.e_type not in ("ET_DYN", "ET_EXEC"):
            return False, "only ET_DYN and ET_EXEC can be loaded"
        if info.phentsize != (56 if info.elf_class == 64 else 32):
            return False, "ELF file's phentsize not the expected size"
        return None

    # --- path lists and dynamic string tokens ------------------------------------------------------------------------

    def _dirs(self, obj: _Object, which: str) -> tuple[str, ...]:
        cached = obj.paths.get(which)
        if cached is None:
            info = obj.info
            raw = None
            if info is not None:
                raw = info.effective_rpath if which == "rpath" else info.runpath
            cached = self._decompose(raw, obj, ":") if raw is not None else ()
            obj.paths[which] = cached
        return cached

    def _library_path_dirs(self) -> tuple[str, ...]:
        if self._env_dirs is None:
            value = self._library_path
            self._env_dirs = self._decompose(value, self.main, ":;") if value else ()
        return self._env_dirs

    def _system_dirs(self) -> tuple[str, ...]:
        return tuple(d.rstrip("/") + "/" for d in self.platform.system_dirs)

    def _decompose(self, value: str, obj: _Object | None, separators: str) -> tuple[str, ...]:
        """elf/dl-load.c fillin_rpath: expand DSTs, drop elements that cannot be expanded, normalise the trailing
        '/', keep '' (the working directory) for empty elements, and keep each directory once."""
        for separator in separators[1:]:
            value = value.replace(separator, separators[0])
        result: list[str] = []
        for element in value.split(separators[0]):
            if element:
                expanded = self._expand(element, obj)
                if not expanded:
                    continue
                expanded = expanded.rstrip("/") or "/"
                if not expanded.endswith("/"):
                    expanded += "/"
                element = expanded
            if element not in result:
                result.append(element)
        return tuple(result)

    def _expand(self, text: str, obj: _Object | None) -> str | None:
        """Substitute $ORIGIN, $LIB, $PLATFORM (also ${…}); None when a known token has no value (glibc drops it)."""
        if "$" not in text:
            return text
        out = []
        index = 0
        while True:
            dollar = text.find("$", index)
            if dollar < 0:
                out.append(text[index:])
                return "".join(out)
            out.append(text[index:dollar])
            rest = text[dollar + 1 :]
            for token in ("ORIGIN", "PLATFORM", "LIB"):
                length = _dst_length(rest, token)
                if length:
                    if token == "ORIGIN":
                        value = obj.origin if obj is not None else None
                    elif token == "PLATFORM":
                        value = self.platform.platform
                    else:
                        value = self.platform.lib
                    if value is None:
                        return None
                    out.append(value)
                    index = dollar + 1 + length
                    break
            else:
                out.append("$")
                index = dollar + 1

    def _real_path(self, path: str) -> str:
        host = self.fs.host_path(path)
        if self.fs.is_host:
            return posixpath.realpath(self.fs.absolute(path))
        return (host[len(self.fs.root):] or "/") if host else path


def _dst_length(rest: str, token: str) -> int:
    """elf/dl-load.c is_dst: `TOKEN` not followed by an identifier character, or `{TOKEN}`."""
    if rest.startswith("{"):
        return len(token) + 2 if rest.startswith(token + "}", 1) else 0
    if not rest.startswith(token):
        return 0
    following = rest[len(token) : len(token) + 1]
    if following and (following.isascii() and (following.isalnum() or following == "_")):
        return 0
    return len(token)


def _dirname(path: str) -> str:
    """The directory part as glibc computes l_origin: everything before the last '/', '/' itself kept."""
    cut = path.rfind("/")
    if cut < 0:
        return "."
    return path[:cut] or "/"


def _shown(dirs: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(display_dir(d) for d in dirs)
