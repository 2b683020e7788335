"""dpkg's database, read without dpkg: `var/lib/dpkg/status`, the per-package file lists, and apt's auto-installed
marks.

What it does: parse the status file's deb822 paragraphs into `DpkgPackage` records, parse relation fields (Depends,
Pre-Depends, Provides) on demand, tell which installed package satisfies a relation (alternatives, `:any` and
arch qualifiers, Multi-Arch, versioned and virtual Provides), and read a package's file list.

What it does not do: validate the database the way dpkg would, read `available`, triggers or diversions, or resolve
anything apt would (candidates, pinning). Paths are taken relative to a root so an image can be read (`--root`).
Files are read through verify/safe_read.py — regular files only, never blocking, each up to a size no real database
comes near (`MAX_STATUS`, `MAX_LIST`) — and, in an image, without following a final symlink out of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from verify.debian.debversion import satisfies
from verify.safe_read import read_text

STATUS_FILE = "var/lib/dpkg/status"
INFO_DIR = "var/lib/dpkg/info"
APT_EXTENDED_STATES = "var/lib/apt/extended_states"
# A desktop's status file is a few MB, the longest file list (a TeX Live documentation package) about 10 MB.
MAX_STATUS = 128 << 20
MAX_LIST = 64 << 20

# dpkg package states whose files are on disk. A package in any of these can be mapped by the loader and needs its
# dependencies, so it counts; "config-files" (removed, only conffiles left) and "not-installed" do not.
# "half-installed" is an interrupted unpack or removal: some files are there, which is enough to count it.
STATES_WITH_FILES = frozenset(
    {"installed", "triggers-pending", "triggers-awaited", "half-configured", "unpacked", "half-installed"}
)

# "Name: value" plus continuation lines, for any field (apt's extended_states) …
_FIELD = re.compile(r"^([^\s:]+):[ \t]*(.*(?:\n[ \t].*)*)", re.MULTILINE)
# … and only the fields used below (the regex fails at once on every other line, which keeps the status file — a few
# MB on a desktop, read after every dpkg run by the apt hook — cheap to parse).
_WANTED_FIELD = re.compile(
    r"^(Package|Status|Architecture|Version|Source|Maintainer|Multi-Arch|Depends|Pre-Depends|Provides):[ \t]*"
    r"(.*(?:\n[ \t].*)*)",
    re.MULTILINE,
)
# One alternative of a relation: name[:arch] [(op version)] [<profiles>] — build profiles never reach the status file,
# but are tolerated.
_ALTERNATIVE = re.compile(
    r"^\s*(?P<name>[a-z0-9][a-z0-9+.\-]*)(?::(?P<arch>[a-z0-9\-]+))?\s*"
    r"(?:\(\s*(?P<op><<|<=|>=|>>|=|<|>)\s*(?P<version>[^)\s]+)\s*\))?\s*(?:<[^>]*>\s*)*$"
)


class DpkgDatabaseError(ValueError):
    """The status file cannot be used (missing, unreadable, not a dpkg status file)."""


@dataclass(frozen=True)
class Relation:
    """One alternative of a relation field, e.g. `libamdhip64-5 (>= 4.5.2)` or `python3:any`."""

    name: str
    arch: str | None = None  # qualifier after ':' ("any", or an architecture)
    operator: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        text = self.name if self.arch is None else f"{self.name}:{self.arch}"
        return text if self.operator is None else f"{text} ({self.operator} {self.version})"


def parse_relations(text: str) -> tuple[tuple[Relation, ...], ...]:
    """A relation field as AND-groups of OR-alternatives: "a | b (>= 1), c" -> ((a, b>=1), (c,)).

    An alternative that cannot be parsed raises ValueError naming it (dpkg never writes one into its database).
    """
    groups = []
    for group_text in text.split(","):
        if not group_text.strip():
            continue
        alternatives = []
        for alternative_text in group_text.split("|"):
            match = _ALTERNATIVE.match(alternative_text)
            if not match:
                raise ValueError(f"cannot parse relation {alternative_text.strip()!r} in {text.strip()!r}")
            alternatives.append(Relation(match["name"], match["arch"], match["op"], match["version"]))
        groups.append(tuple(alternatives))
    return tuple(groups)


@dataclass(frozen=True)
class DpkgPackage:
    """One paragraph of the status file. Relation fields stay raw text until asked for (most are never needed)."""

    name: str
    architecture: str
    version: str
    want: str  # the selection: install, hold, deinstall, purge, unknown
    state: str  # installed, unpacked, half-installed, config-files, not-installed, ...
    source: str  # the source package's name (dpkg omits the field when it equals the binary's name)
    maintainer: str = ""
    multi_arch: str = "no"
    depends: str = ""
    pre_depends: str = ""
    provides: str = ""

    @property
    def has_files(self) -> bool:
        return self.state in STATES_WITH_FILES

    @property
    def key(self) -> str:
        """How dpkg names the instance when several architectures may be installed: name:arch."""
        return f"{self.name}:{self.architecture}"

    def relations(self) -> tuple[tuple[str, tuple[tuple[Relation, ...], ...]], ...]:
        """(field name, parsed groups) for the fields that make a package *need* another: Pre-Depends, Depends."""
        return tuple(
            (field_name, parse_relations(text))
            for field_name, text in (("Pre-Depends", self.pre_depends), ("Depends", self.depends))
            if text
        )

    def provided(self) -> tuple[Relation, ...]:
        return tuple(alternative for (alternative,) in parse_relations(self.provides)) if self.provides else ()


def _package_from_fields(fields: dict[str, str]) -> DpkgPackage | None:
    name = fields.get("Package")
    status = fields.get("Status", "").split()
    if not name or len(status) != 3:
        return None
    source = fields.get("Source", "").split(" ", 1)[0] or name  # "Source: ucx (1.18.1+ds-2)" on binNMUs
    return DpkgPackage(
        name=name,
        architecture=fields.get("Architecture", ""),
        version=fields.get("Version", ""),
        want=status[0],
        state=status[2],
        source=source,
        maintainer=fields.get("Maintainer", ""),
        multi_arch=fields.get("Multi-Arch", "no"),
        depends=" ".join(fields.get("Depends", "").split()),
        pre_depends=" ".join(fields.get("Pre-Depends", "").split()),
        provides=" ".join(fields.get("Provides", "").split()),
    )


def parse_status(text: str) -> tuple[DpkgPackage, ...]:
    """Every paragraph of a status file, in file order. Paragraphs without a Package or a three-word Status are
    skipped (dpkg itself would refuse such a file; the caller is told through `read_status`)."""
    packages = []
    for paragraph in text.split("\n\n"):
        if not paragraph.strip():
            continue
        fields = dict(_WANTED_FIELD.findall(paragraph))
        package = _package_from_fields(fields)
        if package is not None:
            packages.append(package)
    return tuple(packages)


def read_status(root: str | Path = "/") -> tuple[DpkgPackage, ...]:
    path = Path(root) / STATUS_FILE
    try:
        text = read_text(path, MAX_STATUS, errors="replace", follow=_follow(root))
    except FileNotFoundError:
        raise DpkgDatabaseError(
            f"{path}: no dpkg status file — is {root} the root of a Debian/Ubuntu system?"
        ) from None
    except OSError as error:
        raise DpkgDatabaseError(f"{path}: cannot read the dpkg status file ({error.strerror})") from None
    packages = parse_status(text)
    if text.strip() and not packages:
        raise DpkgDatabaseError(f"{path}: no package paragraph in it — not a dpkg status file")
    return packages


def native_architecture(packages: tuple[DpkgPackage, ...]) -> str:
    """The architecture dpkg itself was built for (what an unqualified dependency means), read from the installed
    dpkg package; on a database without dpkg (a test fixture), the most common non-"all" architecture."""
    for package in packages:
        if package.name == "dpkg" and package.has_files:
            return package.architecture
    counts: dict[str, int] = {}
    for package in packages:
        if package.architecture not in ("", "all"):
            counts[package.architecture] = counts.get(package.architecture, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else "all"


class InstalledSet:
    """The packages whose files are on disk, indexed for relation checks."""

    def __init__(self, packages: tuple[DpkgPackage, ...], native_arch: str | None = None):
        self.native_arch = native_arch or native_architecture(packages)
        self.packages = tuple(package for package in packages if package.has_files)
        self._by_name: dict[str, list[DpkgPackage]] = {}
        self._providers: dict[str, list[tuple[DpkgPackage, Relation]]] = {}
        for package in self.packages:
            self._by_name.setdefault(package.name, []).append(package)
            for provided in package.provided():
                self._providers.setdefault(provided.name, []).append((package, provided))

    def named(self, name: str) -> tuple[DpkgPackage, ...]:
        return tuple(self._by_name.get(name, ()))

    def _arch_ok(self, candidate: DpkgPackage, relation: Relation, dependent: DpkgPackage) -> bool:
        # dpkg's deparchsatisfied() (lib/dpkg/depcon.c): an unqualified relation is met by Multi-Arch: foreign of any
        # architecture, ":any" by Multi-Arch: allowed; otherwise the architectures must be equal, with "all" (and an
        # unqualified relation of an arch:all package) meaning the native architecture. ":any" is never equal to an
        # architecture, so a Multi-Arch: foreign package does *not* meet "pkg:any"; ":native" is only meaningful in
        # Build-Depends, and in a binary package's relation dpkg treats it as an unknown architecture (never met).
        if relation.arch is None and candidate.multi_arch == "foreign":
            return True
        if relation.arch == "any" and candidate.multi_arch == "allowed":
            return True
        wanted = dependent.architecture if relation.arch is None else relation.arch
        if wanted in ("all", ""):
            wanted = self.native_arch
        have = self.native_arch if candidate.architecture in ("all", "") else candidate.architecture
        return wanted == have

    def satisfiers(self, relation: Relation, dependent: DpkgPackage) -> tuple[DpkgPackage, ...]:
        """The installed packages that satisfy one alternative for `dependent`, by name or by Provides."""
        found = []
        for candidate in self._by_name.get(relation.name, ()):
            if not self._arch_ok(candidate, relation, dependent):
                continue
            if relation.operator is None or satisfies(candidate.version, relation.operator, relation.version):
                found.append(candidate)
        for candidate, provided in self._providers.get(relation.name, ()):
            if not self._arch_ok(candidate, relation, dependent):
                continue
            if relation.operator is None:
                found.append(candidate)
            # A versioned relation is only met by a versioned Provides ("Provides: foo (= 1.2)").
            elif provided.version is not None and satisfies(provided.version, relation.operator, relation.version):
                found.append(candidate)
        return tuple(dict.fromkeys(found))


def file_list(root: str | Path, package: DpkgPackage) -> tuple[str, ...] | None:
    """The paths a package installed (`dpkg -L`), from info/<name>:<arch>.list (Multi-Arch: same) or info/<name>.list;
    None when there is no list (dpkg lost it, or a hand-made database)."""
    info = Path(root) / INFO_DIR
    for candidate in (info / f"{package.name}:{package.architecture}.list", info / f"{package.name}.list"):
        try:
            text = read_text(candidate, MAX_LIST, errors="surrogateescape", follow=_follow(root))
        except FileNotFoundError:
            continue
        return tuple(line for line in text.splitlines() if line)
    return None


def auto_installed(root: str | Path = "/") -> frozenset[str]:
    """name:arch of the packages apt marked as automatically installed (pulled in as a dependency). Empty when
    apt has no record (dpkg-only systems, images)."""
    try:
        text = read_text(Path(root) / APT_EXTENDED_STATES, MAX_STATUS, errors="replace", follow=_follow(root))
    except OSError:
        return frozenset()
    marked = set()
    for paragraph in text.split("\n\n"):
        fields = dict(_FIELD.findall(paragraph))
        if fields.get("Auto-Installed", "").strip() == "1" and "Package" in fields:
            marked.add(f"{fields['Package'].strip()}:{fields.get('Architecture', '').strip()}")
    return frozenset(marked)


def _follow(root: str | Path) -> bool:
    """On this system a symlinked database file is followed as dpkg would; in an image it would lead out of it."""
    return str(root) in ("", "/")
