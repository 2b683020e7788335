"""The output model of the linkage analysis: what a process maps, in load order, and why.

Everything here is a frozen dataclass with a `to_json()` that returns plain dicts/lists/strings, so other parts
(the runtime check, the apt hook, the reports) can build on it without importing the resolver. Paths are always the
paths *as the analysed system sees them*: with `--root DIR` they are the image's own paths, never DIR/….

Vocabulary (mirrors glibc's `struct link_map`):
- an *object* is a loaded ELF file (the executable, the dynamic loader, each shared library);
- a *request* is one name asked for: a DT_NEEDED entry of an object, or a dlopen() argument;
- a *search step* is one list of directories the loader walked for a request (e.g. the RUNPATH of one object).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

SCHEMA = "verify.process/1"

# How an object came to be loaded (LoadedObject.how) and where a search step's directories come from (SearchStep.kind).
MAIN_PROGRAM = "main program"
INTERPRETER = "interpreter"
DIRECT_PATH = "direct path"  # a name with a '/' (NEEDED or dlopen): no search
RPATH = "RPATH"  # DT_RPATH of the requesting object itself
RPATH_INHERITED = "RPATH (inherited)"  # DT_RPATH of an object further up the requester's loader chain
RPATH_EXECUTABLE = "RPATH of the executable"
LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
RUNPATH = "RUNPATH"
LD_SO_CACHE = "ld.so.cache"
LD_SO_CONF = "ld.so.conf"  # only when the system has no ld.so.cache: what ldconfig would have put there
SYSTEM_DIRS = "system dirs"

# Request.outcome
LOADED = "loaded"  # a new object was mapped for this request
ALREADY_LOADED = "already loaded"  # an object already in the process serves it (see Request.matched_by)
NOT_FOUND = "not found"
ERROR = "error"  # the loader would stop with an error (e.g. a file in the search path that is not ELF)

# Request.matched_by, for ALREADY_LOADED
BY_NAME = "name"  # the name equals the path an object was loaded from, or a name it was requested under
BY_SONAME = "soname"
BY_FILE = "same file"  # a search found a file whose (st_dev, st_ino) is already loaded


@dataclass(frozen=True)
class SearchStep:
    """One list of places the loader tried for a name, in order.

    `kind` is one of the constants above; `owner` the object whose dynamic section supplied the list (None for
    LD_LIBRARY_PATH, the cache and the system dirs); `dirs` the directories after $ORIGIN/$LIB/$PLATFORM expansion
    and de-duplication, each of which was tried as its glibc-hwcaps (and, glibc < 2.37, legacy) subdirectories first.
    For the cache, `dirs` holds the cache file and, when it had an entry, the path it pointed to.
    """

    kind: str
    dirs: tuple[str, ...] = ()
    owner: str | None = None

    @property
    def label(self) -> str:
        if self.kind in (RPATH, RUNPATH):
            return f"{self.kind} {':'.join(self.dirs)} of {self.owner}"
        if self.kind == RPATH_INHERITED:
            return f"RPATH {':'.join(self.dirs)} of {self.owner} (inherited)"
        if self.kind == RPATH_EXECUTABLE:
            return f"RPATH {':'.join(self.dirs)} of the executable {self.owner}"
        if self.kind == LD_LIBRARY_PATH:
            return f"LD_LIBRARY_PATH {':'.join(self.dirs)}"
        return self.kind

    def to_json(self) -> dict:
        return {"kind": self.kind, "owner": self.owner, "dirs": list(self.dirs), "label": self.label}


@dataclass(frozen=True)
class Request:
    """One name asked for, by whom, and what the loader did with it."""

    name: str
    requester: str | None  # path of the asking object; None when the process itself asks (dlopen without a caller)
    kind: str  # "needed" | "dlopen"
    outcome: str  # LOADED | ALREADY_LOADED | NOT_FOUND | ERROR
    path: str | None = None  # the object that serves the request
    matched_by: str | None = None  # BY_NAME | BY_SONAME | BY_FILE when ALREADY_LOADED
    found_via: SearchStep | None = None  # the step in which the file was found (None: direct path or already loaded)
    found_in: str | None = None  # the directory (with hwcaps subdirectory, if any) the file was found in
    searched: tuple[SearchStep, ...] = ()  # every step tried, in order (for a miss: everything the loader tried)
    error: str | None = None  # ERROR: the loader's reason, one line
    skipped: tuple[str, ...] = ()  # files passed over on the way: "PATH (wrong ELF class: ELFCLASS32)"

    @property
    def found(self) -> bool:
        return self.outcome in (LOADED, ALREADY_LOADED)

    def describe(self) -> str:
        """One line for a person.

        E.g. 'libhipblas.so.3 not found via RUNPATH /opt/rocm/lib of …, ld.so.cache, system dirs'."""
        who = f" (needed by {self.requester})" if self.requester and self.kind == "needed" else ""
        if self.outcome == NOT_FOUND:
            where = ", ".join(step.label for step in self.searched) or "nowhere (nothing to search)"
            return f"{self.name}{who} not found via {where}"
        if self.outcome == ERROR:
            return f"{self.name}{who}: {self.error}"
        if self.outcome == ALREADY_LOADED:
            return f"{self.name}{who} => {self.path} (already loaded, matched by {self.matched_by})"
        via = self.found_via.label if self.found_via else DIRECT_PATH
        return f"{self.name}{who} => {self.path} (via {via})"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "requester": self.requester,
            "kind": self.kind,
            "outcome": self.outcome,
            "path": self.path,
            "matched_by": self.matched_by,
            "found_via": self.found_via.to_json() if self.found_via else None,
            "found_in": self.found_in,
            "searched": [step.to_json() for step in self.searched],
            "error": self.error,
            "skipped": list(self.skipped),
            "description": self.describe(),
        }


@dataclass(frozen=True)
class LoadedObject:
    """One ELF object in the process, in load order."""

    path: str  # where the loader opened it (glibc's l_name): not symlink-resolved
    requested_as: str  # the first name it was requested under (what ldd prints left of '=>')
    how: str  # MAIN_PROGRAM | INTERPRETER | DIRECT_PATH | one of the SearchStep kinds
    via: str  # a person's label: "RUNPATH /opt/rocm/lib of /x/libbnb.so", "ld.so.cache", "main program", …
    requested_by: str | None = None  # the object whose request loaded it (None: main program, interpreter, process)
    loader: str | None = (
        None  # glibc's l_loader: whose RPATH chain its own dependencies inherit (None for dlopen roots)
    )
    dlopened: bool = False  # loaded by a dlopen() call rather than as a dependency
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None
    runpath: str | None = None
    names: tuple[str, ...] = ()  # every name that resolved to it (requests and SONAME matches)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "requested_as": self.requested_as,
            "how": self.how,
            "via": self.via,
            "requested_by": self.requested_by,
            "loader": self.loader,
            "dlopened": self.dlopened,
            "soname": self.soname,
            "needed": list(self.needed),
            "rpath": self.rpath,
            "runpath": self.runpath,
            "names": list(self.names),
        }


@dataclass(frozen=True)
class Finding:
    """Something wrong with one file that did not stop the rest of the analysis (e.g. not ELF, truncated)."""

    path: str
    message: str  # one line, naming the file

    def to_json(self) -> dict:
        return {"path": self.path, "message": self.message}


@dataclass(frozen=True)
class ProcessImage:
    """What the process maps, in load order, every request made, and per-file problems.

    `objects[0]` is the main program. The interpreter appears where breadth-first loading reaches it (normally right
    after libc), as ldd lists it; if nothing needs it, it is not in `objects` (ldd does not print it either).
    """

    executable: str
    objects: tuple[LoadedObject, ...]
    requests: tuple[Request, ...]
    findings: tuple[Finding, ...] = ()
    root: str = "/"
    platform: dict = field(default_factory=dict)  # the loader facts used (hwcaps levels, $PLATFORM, $LIB, glibc, …)

    @property
    def missing(self) -> tuple[Request, ...]:
        return tuple(r for r in self.requests if r.outcome in (NOT_FOUND, ERROR))

    @property
    def ok(self) -> bool:
        return not self.missing and not self.findings

    def object(self, path: str) -> LoadedObject | None:
        return next((o for o in self.objects if o.path == path), None)

    def object_named(self, name: str) -> LoadedObject | None:
        """The object that serves `name` (a path, a name it was requested under, or its SONAME), as the loader
        matches it."""
        return next((o for o in self.objects if name == o.path or name in o.names or name == o.soname), None)

    def requests_for(self, name: str) -> tuple[Request, ...]:
        return tuple(r for r in self.requests if r.name == name)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "executable": self.executable,
            "root": self.root,
            "platform": self.platform,
            "ok": self.ok,
            "objects": [o.to_json() for o in self.objects],
            "requests": [r.to_json() for r in self.requests],
            "findings": [f.to_json() for f in self.findings],
        }


def fast_new(cls, **values):
    """Build a frozen dataclass instance without its generated __init__ (one object.__setattr__ per field): the
    resolver makes thousands of Requests per analysis and this halves their cost. Only for the classes above, whose
    fields all have plain defaults or are passed; the result is an ordinary, equal, frozen instance."""
    defaults = _DEFAULTS.get(cls)
    if defaults is None:
        defaults = _DEFAULTS[cls] = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    obj = object.__new__(cls)
    # The merged dict becomes the instance's __dict__ as it is (set through object.__setattr__: the class's own
    # __setattr__ is the frozen one, which refuses every assignment).
    object.__setattr__(obj, "__dict__", defaults | values)
    return obj


_DEFAULTS: dict[type, dict] = {}
