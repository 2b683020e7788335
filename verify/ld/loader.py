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

import os

from verify.ld import image as m
from verify.ld.elf import ElfError, ElfInfo
from verify.ld.fsview import FileSystemView
from verify.ld.ldcache import LdCache
from verify.ld.platform import LoaderPlatform

_ELF64_EHDR_SIZE = 64


class _Object:
    """glibc's struct link_map, reduced to what the search needs (mutable while the model runs; a plain class, as
    thousands are made per venv)."""

    __slots__ = (
        "path",
        "info",
        "names",
        "requested_as",
        "how",
        "via",
        "origin",
        "file_id",
        "loader",
        "requested_by",
        "dlopened",
        "has_searchlist",
        "paths",
        "plan",
    )

    def __init__(
        self,
        path: str,
        info: ElfInfo | None,
        names: list[str],
        requested_as: str,
        how: str,
        via: str,
        origin: str | None,
        *,
        file_id: tuple[int, int] | None = None,
        loader: _Object | None = None,
        requested_by: _Object | None = None,
        dlopened: bool = False,
        has_searchlist: bool = False,
    ):
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
        self.plan: tuple | None = None  # what a search for its requests depends on (Loader._plan), computed once

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


class _Hit:
    """A file the loader would open for a request: where, in which search directory, what it is."""

    __slots__ = ("path", "directory", "info", "file_id")  # a plain class: a NamedTuple costs an exec() at import

    def __init__(self, path: str, directory: str, info: ElfInfo, file_id: tuple[int, int]):
        self.path = path
        self.directory = directory
        self.info = info
        self.file_id = file_id


class _Answer:
    """What looking for one name found (glibc's _dl_map_object up to opening the file), with what each request it
    answers needs worked out once: a search answer is shared by every request for that name with the same plan."""

    __slots__ = ("hit", "step", "searched", "skipped", "fatal", "found_in", "how", "via", "origin", "_requests")

    def __init__(
        self,
        fs: FileSystemView,
        hit: _Hit | None,
        step: m.SearchStep | None,
        searched: tuple,
        skipped: tuple,
        fatal: _FatalLoadError | None = None,
    ):
        self.hit = hit
        self.step = step  # the step the file was found in (None: a direct path, or nothing found)
        self.searched = searched
        self.skipped = skipped
        self.fatal = fatal
        if hit is not None:
            self.found_in = display_dir(hit.directory)
            self.how = step.kind if step else m.DIRECT_PATH
            self.via = step.label if step else m.DIRECT_PATH
            self.origin = _dirname(fs.absolute(hit.path))
        self._requests: dict[tuple, m.Request] = {}

    def request(
        self, name: str, requester: _Object | None, kind: str, outcome: str, already_loaded: _Object | None = None
    ) -> m.Request:
        """The Request this answer makes for `name` from `requester` (made once per distinct request, then shared:
        Requests are immutable)."""
        requester_path = requester.path if requester else None
        key = (requester_path, kind, outcome, already_loaded.path if already_loaded else None)
        request = self._requests.get(key)
        if request is None:
            fields = {"searched": self.searched, "skipped": self.skipped}
            if outcome == m.ERROR:
                fields["error"] = str(self.fatal)
            elif outcome != m.NOT_FOUND:
                fields.update(found_via=self.step, found_in=self.found_in)
                if already_loaded is not None:  # the file found is one already loaded under another name
                    fields.update(path=already_loaded.path, matched_by=m.BY_FILE)
                else:
                    fields["path"] = self.hit.path
            request = self._requests[key] = m.fast_new(
                m.Request, name=name, requester=requester_path, kind=kind, outcome=outcome, **fields
            )
        return request


class _FatalLoadError(Exception):
    """The loader would stop here (glibc's `lose`): a file in the way that is not loadable ELF."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _memoised(memo: dict, key, compute, skipped: list):
    """`compute(skips)` once per key for the run: later calls replay its answer, the files it skipped (appended to
    `skipped`) and the fatal error it raised."""
    answer = memo.get(key)
    if answer is None:
        found_skips: list[str] = []
        try:
            answer = (compute(found_skips), tuple(found_skips), None)
        except _FatalLoadError as error:
            answer = (None, tuple(found_skips), error)
        memo[key] = answer
    value, skips, fatal = answer
    skipped.extend(skips)
    if fatal is not None:
        raise fatal
    return value


def display_dir(directory: str) -> str:
    """glibc keeps search directories with a trailing '/', and '' for the working directory."""
    if directory == "":
        return "."
    return directory[:-1] if len(directory) > 1 and directory.endswith("/") else directory


class RunMemo:
    """What the resolver remembers between the analyses of one Analyser: answers that depend only on the files (and the
    fixed platform, cache and working directory), valid while the files don't change. Analysing a venv's libraries one
    by one asks the same questions hundreds of times (every library needs libc.so.6, searched the same way)."""

    def __init__(self) -> None:
        self.searches: dict[tuple, _Answer] = {}  # (name, plan) -> what the search found
        self.walks: dict[tuple, tuple] = {}  # (name, directory list) -> glibc's open_path over that list
        self.opens: dict[str, tuple] = {}  # path -> glibc's open_verify of that file
        self.cache: dict[str, str | None] = {}  # name -> ld.so.cache's entry for it
        self.steps: dict[tuple, m.SearchStep] = {}  # (kind, dirs, owner) -> the immutable SearchStep
        self.requests: dict[tuple, m.Request] = {}  # already-loaded requests, immutable, shared by analyses
        self.interpreters: dict[str, tuple] = {}  # interpreter path -> (stat, ElfInfo or None)
        self.paths: dict[tuple, tuple[str, ...]] = {}  # (RPATH/RUNPATH/LD_LIBRARY_PATH, $ORIGIN, separators) -> dirs


class Loader:
    def __init__(
        self,
        platform: LoaderPlatform,
        fs: FileSystemView,
        cache: LdCache | None,
        *,
        conf_dirs: tuple[str, ...] | None = None,
        library_path: str | None = None,
        memo: RunMemo | None = None,
    ):
        self.platform = platform
        self.fs = fs
        self.memo = memo or RunMemo()
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

    def start(self, path: str, *, info: ElfInfo, executed: bool, st: os.stat_result | None = None) -> None:
        """Map the main program and its dependencies, as ld.so does at start-up.

        `executed`: the kernel started it (a real process: $ORIGIN is the directory of the symlink-resolved
        executable, via /proc/self/exe); otherwise ld.so loads it by the path given, as `ldd FILE` does.
        `st`: the program's stat, when the caller has it already.
        """
        if st is None:
            st = self.fs.stat(path)
        if executed:
            real = self.fs.real_path(path)
            origin = _dirname(real)
            names: list[str] = []
        else:
            origin = _dirname(self.fs.absolute(path))
            names = [path]
        self.main = _Object(
            path,
            info,
            names,
            path,
            m.MAIN_PROGRAM,
            m.MAIN_PROGRAM,
            origin,
            file_id=(st.st_dev, st.st_ino) if st and not executed else None,
            has_searchlist=True,
        )
        self.objects.append(self.main)
        if executed:  # the kernel-loaded program is known by no name and no file identity (its l_name is "")
            if self.main.soname is not None:
                self._by_soname[self.main.soname] = self.main
        else:
            self._register(self.main)
        interp = info.interp or self.platform.interpreter
        known = self.memo.interpreters.get(interp)  # the same one in nearly every analysis of a run
        if known is None:
            interp_st = self.fs.stat(interp)
            try:
                interp_info = self.fs.elf(interp, interp_st) if interp_st else None
            except ElfError:
                interp_info = None
            known = self.memo.interpreters[interp] = (interp_st, interp_info)
        interp_st, interp_info = known
        self.interpreter = _Object(
            interp,
            interp_info,
            [interp],
            interp,
            m.INTERPRETER,
            m.INTERPRETER,
            _dirname(interp),
            file_id=(interp_st.st_dev, interp_st.st_ino) if interp_st else None,
        )
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
        queued = {root}
        by_name = self._by_name
        requests = self.requests
        for obj in queue:  # grows while it is walked: breadth-first
            if obj.info is None:
                continue
            for name in obj.info.needed:
                dep = by_name.get(name)
                if dep is not None and "$" not in name:
                    # _request's first answer, inlined: most requests name an object already loaded under that name.
                    requests.append(self._already_loaded(name, obj, "needed", dep, m.BY_NAME))
                else:
                    dep, _ = self._request(name, obj, "needed")
                    if dep is None:
                        continue
                if dep in queued:
                    continue
                if dep is self.interpreter and not self._interpreter_placed:
                    # rtld.c puts the interpreter's map right after the object reached before it (what ldd shows).
                    self.objects.insert(self.objects.index(queue[-1]) + 1, dep)
                    self._interpreter_placed = True
                queued.add(dep)
                queue.append(dep)

    # --- one request (_dl_map_object) --------------------------------------------------------------------------------

    def _request(self, name: str, requester: _Object | None, kind: str) -> tuple[_Object | None, bool]:
        if kind == "needed" and "$" in name:
            # elf/dl-deps.c expands DSTs in DT_NEEDED before anything else: the expanded name is what is looked up
            # (and what ldd prints); an expansion that comes out empty is an error.
            expanded = self._expand(name, requester)
            if not expanded:
                self._record(
                    name,
                    requester,
                    kind,
                    m.ERROR,
                    error=f"{name}: empty dynamic string token substitution (needed by "
                    f"{requester.path if requester else 'the program'})",
                )
                return None, False
            name = expanded
        loaded = self._by_name.get(name)
        if loaded is not None:
            self.requests.append(self._already_loaded(name, requester, kind, loaded, m.BY_NAME))
            return loaded, False
        loaded = self._by_soname.get(name)
        if loaded is not None:
            loaded.names.append(name)  # glibc caches the SONAME as a name of the object (l_soname_added)
            self._by_name.setdefault(name, loaded)
            self.requests.append(self._already_loaded(name, requester, kind, loaded, m.BY_SONAME))
            return loaded, False

        answer = self._open_direct(name, requester) if "/" in name else self._search(name, requester)
        if answer.fatal is not None:
            fatal = answer.fatal
            self.requests.append(answer.request(name, requester, kind, m.ERROR))
            self.findings.append(m.Finding(fatal.path, f"{fatal.path}: {fatal.reason}"))
            return None, False

        hit = answer.hit
        if hit is None:
            self.requests.append(answer.request(name, requester, kind, m.NOT_FOUND))
            return None, False

        same = self._by_file.get(hit.file_id)
        if same is not None:
            if name not in same.names:
                same.names.append(name)
                self._by_name.setdefault(name, same)
            self.requests.append(answer.request(name, requester, kind, m.ALREADY_LOADED, same))
            return same, False

        dlopened = kind == "dlopen"
        obj = _Object(
            path=hit.path,
            info=hit.info,
            names=[name],
            requested_as=name,
            how=answer.how,
            via=answer.via,
            origin=answer.origin,
            file_id=hit.file_id,
            # glibc's __RTLD_CALLMAP: a dlopen'ed object has no l_loader, whoever called dlopen.
            loader=None if dlopened else requester,
            requested_by=requester,
            dlopened=dlopened,
        )
        self.objects.append(obj)
        self._register(obj)
        self.requests.append(answer.request(name, requester, kind, m.LOADED))
        return obj, True

    def _already_loaded(
        self, name: str, requester: _Object | None, kind: str, loaded: _Object, matched_by: str
    ) -> m.Request:
        """The request for a name an object already answers. Most requests of an analysis are of this kind and the
        same ones recur in every analysis of a run (each library asks for libc.so.6 …): Requests are immutable, so each
        distinct one is made once per run and shared."""
        requester_path = requester.path if requester else None
        key = (name, requester_path, kind, loaded.path, matched_by)
        request = self.memo.requests.get(key)
        if request is None:
            request = self.memo.requests[key] = m.fast_new(
                m.Request,
                name=name,
                requester=requester_path,
                kind=kind,
                outcome=m.ALREADY_LOADED,
                path=loaded.path,
                matched_by=matched_by,
            )
        return request

    def _register(self, obj: _Object) -> None:
        """Index a newly loaded object by its path, names and SONAME (the earliest loaded object wins a tie)."""
        by_name = self._by_name
        by_name.setdefault(obj.path, obj)
        for name in obj.names:
            by_name.setdefault(name, obj)
        if obj.info is not None and obj.info.soname is not None:
            self._by_soname.setdefault(obj.info.soname, obj)
        if obj.file_id is not None:
            self._by_file.setdefault(obj.file_id, obj)

    def _record(self, name, requester, kind, outcome, **fields) -> None:
        self.requests.append(
            m.fast_new(
                m.Request,
                name=name,
                requester=requester.path if requester else None,
                kind=kind,
                outcome=outcome,
                **fields,
            )
        )

    # --- the search ---------------------------------------------------------------------------------------------------
    # A search's answer depends only on the name and on its plan: the directory lists tried before ld.so.cache, in
    # order, and whether the default paths are off (-z nodefaultlib); the cache and the system directories are the
    # same for every request. A requester's plan is fixed once it is loaded, so it is worked out once per object, and
    # each (name, plan) is searched once per run: the same few hundred searches recur in every analysis of a venv.

    def _open_direct(self, name: str, requester: _Object | None) -> _Answer:
        """A name with '/': that path, no search."""
        skipped: list[str] = []
        try:
            realname = self._expand(name, requester) if requester else name
            hit = None
            if realname:
                found = self._open(realname, skipped)
                hit = _Hit(realname, _dirname(realname), *found) if found else None
        except _FatalLoadError as error:
            return _Answer(self.fs, None, None, (), tuple(skipped), error)
        return _Answer(self.fs, hit, None, (), tuple(skipped))

    def _search(self, name: str, requester: _Object | None) -> _Answer:
        """The search for a name without '/', memoised per run by the name and the requester's plan."""
        plan = requester.plan if requester is not None and requester.plan is not None else self._plan(requester)
        key = (name, plan)
        answer = self.memo.searches.get(key)
        if answer is None:
            answer = self.memo.searches[key] = self._run_search(name, plan)
        return answer

    def _plan(self, requester: _Object | None) -> tuple:
        """((kind, dirs, owner) for each directory list tried before the cache, in order; nodeflib), for names that
        `requester` asks for (None: the process itself, i.e. a dlopen from the executable)."""
        main = self.main
        lists = []
        if requester is None or requester.info is None or requester.info.runpath is None:
            did_main = False
            chain = requester
            while chain is not None:
                dirs = self._dirs(chain, "rpath")
                if dirs:
                    lists.append((m.RPATH if chain is requester else m.RPATH_INHERITED, dirs, chain.path))
                    did_main |= chain is main
                chain = chain.loader
            if not did_main and main is not None:
                dirs = self._dirs(main, "rpath")
                if dirs:
                    lists.append((m.RPATH_EXECUTABLE, dirs, main.path))

        env_dirs = self._library_path_dirs()
        if env_dirs:
            lists.append((m.LD_LIBRARY_PATH, env_dirs, None))

        if requester is not None:
            dirs = self._dirs(requester, "runpath")
            if dirs:
                lists.append((m.RUNPATH, dirs, requester.path))

        flags_owner = requester or main
        nodeflib = bool(flags_owner and flags_owner.info and flags_owner.info.nodeflib)
        plan = (tuple(lists), nodeflib)
        if requester is not None:
            requester.plan = plan
        return plan

    def _run_search(self, name: str, plan: tuple) -> _Answer:
        lists, nodeflib = plan
        searched: list[m.SearchStep] = []
        skipped: list[str] = []
        try:
            hit, step = self._walk_plan(name, lists, nodeflib, searched, skipped)
        except _FatalLoadError as error:
            return _Answer(self.fs, None, None, tuple(searched), tuple(skipped), error)
        return _Answer(self.fs, hit, step, tuple(searched), tuple(skipped))

    def _walk_plan(self, name: str, lists: tuple, nodeflib: bool, searched: list, skipped: list):
        for kind, dirs, owner in lists:
            hit = self._try(name, dirs, self._step(kind, dirs, owner), searched, skipped)
            if hit[0]:
                return hit

        if self.cache is not None:
            cached = self._cache_lookup(name)
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

    def _cache_lookup(self, name: str) -> str | None:
        """ld.so.cache's entry for `name` on this platform (memoised per run: the same names recur in every plan)."""
        memo = self.memo.cache
        if name not in memo:
            memo[name] = self.cache.lookup(name, self.platform)
        return memo[name]

    def _step(self, kind: str, dirs: tuple[str, ...], owner: str | None = None, *, shown: bool = False) -> m.SearchStep:
        """SearchSteps are immutable and the same few recur in every request: make each once per run."""
        memo = self.memo.steps
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
        return _memoised(self.memo.walks, (name, dirs), lambda skips: self._walk(name, dirs, skips), skipped)

    def _walk(self, name: str, dirs: tuple[str, ...], skipped: list) -> _Hit | None:
        subdirs = self.platform.subdirs
        for directory in dirs:
            for subdir, names in self.fs.search_places(directory, subdirs):
                if name in names:
                    where = directory + subdir
                    found = self._open(where + name, skipped)
                    if found:
                        return _Hit(where + name, where, *found)
        return None

    def _open(self, path: str, skipped: list) -> tuple[ElfInfo, tuple[int, int]] | None:
        """glibc's open_verify: the file's info, None to go on searching, or _FatalLoadError (memoised per path for
        the run, like the directory listings: the same cached libc path is opened for nearly every analysis)."""
        return _memoised(self.memo.opens, path, lambda skips: self._verify(path, skips), skipped)

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
        if error.not_regular:  # a FIFO (glibc would wait on it for ever), a device, a socket: never read here
            return error.reason
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
        '/', keep '' (the working directory) for empty elements, and keep each directory once.

        Memoised per run: only $ORIGIN depends on the object, and the same RUNPATH of the same library is decomposed
        in every analysis that loads it."""
        key = (value, obj.origin if obj is not None else None, separators)
        found = self.memo.paths.get(key)
        if found is None:
            found = self.memo.paths[key] = self._decompose_now(value, obj, separators)
        return found

    def _decompose_now(self, value: str, obj: _Object | None, separators: str) -> tuple[str, ...]:
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
