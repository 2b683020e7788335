"""Stray distro-archive ROCm packages on a system: which are installed, what needs them, and which ship a library a
consumer of the expected ROCm release could bind to by SONAME (the release's `sonames`; the JSON keeps the name
`rocm_7_2_soname(s)` of schema verify.strays/1).

Reads `var/lib/dpkg/status` once, the file lists (`var/lib/dpkg/info/*.list`) and the ELF headers of the shared
libraries only of the strays, and apt's auto-installed marks. It is meant to run after every dpkg run (the apt hook),
so it parses relation fields only of packages whose Depends/Pre-Depends mention a stray or something one provides.

What it does not do: decide what to remove (roles/strays/model.py does, from this report), or ask apt anything.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from verify.debian.distro_rocm import is_distro_rocm
from verify.debian.dpkg import DpkgPackage, InstalledSet, auto_installed, file_list, native_architecture, read_status
from verify.ld.elf import ElfError, read_elf
from verify.ld.fsview import FileSystemView
from verify.stack.rocm_release import newest_release

SCHEMA = "verify.strays/1"

# A shared library by its file name: libNAME.so or libNAME.so.VERSION… (not .so-files like "foo.so.conf").
_SHARED_LIBRARY = re.compile(r"^lib.*\.so(\.\d+)*$")


@dataclass(frozen=True)
class Dependent:
    """An installed package that depends on a stray (Depends or Pre-Depends), and whether it could do without it."""

    package: str
    architecture: str
    field: str  # "Depends" | "Pre-Depends"
    relation: str  # the whole AND-group as dpkg stores it, e.g. "libamdhip64-5 (>= 4.5.2)"
    alternatives: tuple[str, ...] = ()  # other installed packages (name:arch) that satisfy the same group

    @property
    def needs_it(self) -> bool:
        """True when the stray is the only installed package that satisfies this group."""
        return not self.alternatives

    def to_json(self) -> dict:
        return {
            "package": self.package,
            "architecture": self.architecture,
            "field": self.field,
            "relation": self.relation,
            "alternatives": list(self.alternatives),
        }

    @classmethod
    def from_json(cls, data: dict) -> Dependent:
        return cls(data["package"], data["architecture"], data["field"], data["relation"], tuple(data["alternatives"]))


@dataclass(frozen=True)
class SharedLibrary:
    """A shared library a stray installed, with the SONAME from its own ELF header (None: it has none, or the file
    could not be read — then `error` says why), and whether the expected release's libraries carry that SONAME."""

    path: str
    soname: str | None
    error: str | None = None
    rocm_7_2_soname: bool = False  # a consumer of the expected release could bind to it (the name is the schema's)

    def to_json(self) -> dict:
        return {"path": self.path, "soname": self.soname, "rocm_7_2_soname": self.rocm_7_2_soname, "error": self.error}

    @classmethod
    def from_json(cls, data: dict) -> SharedLibrary:
        return cls(data["path"], data["soname"], data.get("error"), bool(data["rocm_7_2_soname"]))


@dataclass(frozen=True)
class Stray:
    package: str
    version: str
    architecture: str
    source: str
    want: str  # dpkg selection: install, hold, deinstall, purge
    state: str  # dpkg state: installed, unpacked, half-installed, …
    auto_installed: bool  # apt pulled it in as a dependency (False: installed by hand, or apt has no record)
    dependents: tuple[Dependent, ...] = ()
    libraries: tuple[SharedLibrary, ...] = ()
    # What it is there for: the packages at the top of the chains of need ending at it (see _pulled_in_by).
    pulled_in_by: tuple[str, ...] = ()
    file_list_missing: bool = False

    @property
    def needed_by(self) -> tuple[str, ...]:
        """Installed packages that need this stray (it is their only way to satisfy a dependency)."""
        return tuple(dict.fromkeys(dependent.package for dependent in self.dependents if dependent.needs_it))

    @property
    def rocm_7_2_sonames(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lib.soname for lib in self.libraries if lib.rocm_7_2_soname))

    def to_json(self) -> dict:
        return {
            "package": self.package,
            "version": self.version,
            "architecture": self.architecture,
            "source": self.source,
            "want": self.want,
            "state": self.state,
            "auto_installed": self.auto_installed,
            "needed_by": list(self.needed_by),
            "pulled_in_by": list(self.pulled_in_by),
            "rocm_7_2_sonames": list(self.rocm_7_2_sonames),
            "dependents": [dependent.to_json() for dependent in self.dependents],
            "libraries": [library.to_json() for library in self.libraries],
            "file_list_missing": self.file_list_missing,
        }

    @classmethod
    def from_json(cls, data: dict) -> Stray:
        return cls(
            package=data["package"],
            version=data["version"],
            architecture=data["architecture"],
            source=data["source"],
            want=data["want"],
            state=data["state"],
            auto_installed=data["auto_installed"],
            dependents=tuple(Dependent.from_json(item) for item in data["dependents"]),
            libraries=tuple(SharedLibrary.from_json(item) for item in data["libraries"]),
            pulled_in_by=tuple(data["pulled_in_by"]),
            file_list_missing=data["file_list_missing"],
        )

    def describe(self) -> str:
        """One line: what it is, why it is there, what it risks."""
        text = f"{self.package} {self.version} ({self.architecture}, source {self.source})"
        if self.state != "installed":
            text += f", dpkg state {self.state}"
        if self.needed_by:
            text += f", needed by {', '.join(self.needed_by)}"
        if self.pulled_in_by and self.pulled_in_by != self.needed_by:
            text += f", pulled in by {', '.join(self.pulled_in_by)}"
        if not self.needed_by:
            text += ", nothing depends on it" + ("" if self.auto_installed else " (installed by hand)")
        if self.rocm_7_2_sonames:
            text += f"; ships {', '.join(self.rocm_7_2_sonames)}, a SONAME a ROCm 7.2 consumer could bind to"
        return text


@dataclass(frozen=True)
class StraysReport:
    root: str
    native_architecture: str
    strays: tuple[Stray, ...]

    @property
    def binding_risk(self) -> tuple[Stray, ...]:
        return tuple(stray for stray in self.strays if stray.rocm_7_2_sonames)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "root": self.root,
            "native_architecture": self.native_architecture,
            "strays": [stray.to_json() for stray in self.strays],
        }

    @classmethod
    def from_json(cls, data: dict) -> StraysReport:
        schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
        if schema != SCHEMA:
            raise ValueError(f"strays report: schema {schema!r}, expected {SCHEMA!r}")
        return cls(data["root"], data["native_architecture"], tuple(Stray.from_json(item) for item in data["strays"]))


def _mentions(text: str, names: frozenset[str]) -> bool:
    # A cheap pre-filter before parsing (substring, so it may let through a few that the parse then rules out).
    return any(name in text for name in names)


def _dependents_by_stray(
    installed: InstalledSet, strays: list[DpkgPackage], candidates: list[DpkgPackage]
) -> dict[str, tuple[Dependent, ...]]:
    """For each stray (by name:arch), every AND-group of a candidate's Depends/Pre-Depends that it satisfies."""
    stray_ids = {id(stray) for stray in strays}
    found: dict[str, list[Dependent]] = {stray.key: [] for stray in strays}
    for package in candidates:
        for field_name, groups in package.relations():
            for group in groups:
                satisfiers = tuple(
                    dict.fromkeys(
                        found for alternative in group for found in installed.satisfiers(alternative, package)
                    )
                )
                relation = " | ".join(str(alternative) for alternative in group)
                for satisfier in satisfiers:
                    if id(satisfier) not in stray_ids or satisfier is package:
                        continue
                    others = tuple(other.key for other in satisfiers if other is not satisfier)
                    found[satisfier.key].append(
                        Dependent(package.name, package.architecture, field_name, relation, others)
                    )
    return {key: tuple(dependents) for key, dependents in found.items()}


def _libraries(view: FileSystemView, paths: tuple[str, ...], sonames: frozenset[str]) -> tuple[SharedLibrary, ...]:
    found = []
    for path in paths:
        directory, name = posixpath.split(path)
        if not _SHARED_LIBRARY.match(name):
            continue
        # The directory is resolved inside the analysed system (an image's /lib may be a symlink to /usr/lib); the
        # entry itself is not: symlinks (the SONAME and development links) point at a real file the package lists too.
        host_directory = view.host_path(directory)
        if host_directory is None:
            continue
        on_disk = os.path.join(host_directory, name)
        if os.path.islink(on_disk) or not os.path.isfile(on_disk):
            continue
        try:
            soname = read_elf(path, opened_path=on_disk, follow=False).soname
            found.append(SharedLibrary(path, soname, rocm_7_2_soname=soname in sonames))
        except ElfError as error:
            found.append(SharedLibrary(path, None, error.reason))
    return tuple(found)


def _pulled_in_by(stray_keys: set[str], dependents_of: dict[str, tuple[Dependent, ...]], key: str) -> tuple[str, ...]:
    """The packages at the top of the chains of need that end at `key`: non-strays that need it (directly or through
    strays that need each other), and strays that need it through such a chain while nothing needs them."""
    roots: list[str] = []
    seen = {key}
    queue = [key]
    while queue:
        current = queue.pop(0)
        needers = [dependent for dependent in dependents_of.get(current, ()) if dependent.needs_it]
        if current != key and not needers and current.split(":")[0] not in roots:
            roots.append(current.split(":")[0])
        for dependent in needers:
            dependent_key = f"{dependent.package}:{dependent.architecture}"
            if dependent_key in stray_keys:
                if dependent_key not in seen:
                    seen.add(dependent_key)
                    queue.append(dependent_key)
            elif dependent.package not in roots:
                roots.append(dependent.package)
    return tuple(roots)


def _auto_installed(package: DpkgPackage, marked: frozenset[str], native: str) -> bool:
    # apt records arch:all packages under the native architecture.
    return package.key in marked or (package.architecture == "all" and f"{package.name}:{native}" in marked)


def find_strays(
    root: str | Path = "/",
    packages: tuple[DpkgPackage, ...] | None = None,
    view: FileSystemView | None = None,
    sonames: frozenset[str] | None = None,
) -> StraysReport:
    """The stray distro ROCm packages installed under `root` (raises dpkg.DpkgDatabaseError if it has no dpkg
    database). `packages`: its status file's packages, when the caller has parsed them already; `view`: the caller's
    view of the files under `root`, when it has one; `sonames`: those of the expected release (default: the newest
    known release's)."""
    root_path = Path(root)
    if packages is None:
        packages = read_status(root_path)
    native = native_architecture(packages)
    installed = InstalledSet(packages, native)
    strays = [
        package for package in installed.packages if is_distro_rocm(package.source, package.maintainer, package.version)
    ]
    if not strays:
        return StraysReport(str(root), native, ())

    names = frozenset(stray.name for stray in strays) | frozenset(
        provided.name for stray in strays for provided in stray.provided()
    )
    candidates = [
        package
        for package in installed.packages
        if _mentions(package.depends, names) or _mentions(package.pre_depends, names)
    ]
    auto = auto_installed(root_path)
    dependents_of = _dependents_by_stray(installed, strays, candidates)
    stray_keys = set(dependents_of)

    view = view or FileSystemView(os.fspath(root))
    sonames = newest_release().sonames if sonames is None else sonames
    report = []
    for stray in sorted(strays, key=lambda package: (package.name, package.architecture)):
        listed = file_list(root_path, stray)
        report.append(
            Stray(
                package=stray.name,
                version=stray.version,
                architecture=stray.architecture,
                source=stray.source,
                want=stray.want,
                state=stray.state,
                auto_installed=_auto_installed(stray, auto, native),
                dependents=dependents_of[stray.key],
                libraries=_libraries(view, listed or (), sonames),
                pulled_in_by=_pulled_in_by(stray_keys, dependents_of, stray.key),
                file_list_missing=listed is None,
            )
        )
    return StraysReport(os.fspath(root), native, tuple(report))
