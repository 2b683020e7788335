"""The venv stage's decisions, pure: is a requirement met by what is installed, does the venv need creating, for
which platforms does the controller download wheels, and may the venv live at its path (who else could change it).

Why not pyinfra's pip operations: its fact drops local version labels (`2.13.0+rocm7.2`), so `torch==2.13.0+rocm7.2`
looks unmet and is reinstalled on every run. Here requirements are compared with packaging's PEP 440 rules against
what `importlib.metadata` reports inside the venv.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

# The oldest glibc each legacy manylinux alias stands for (PEP 600), for x86_64 and i686.
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


@dataclass(frozen=True)
class HostPython:
    """The host's python3: what the venv will run, and so what the wheels must be built for."""

    version: str  # "3.11.2"
    glibc: str  # "2.36"
    machine: str  # "x86_64"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def tag(self) -> str:
        """A name for the wheel set this host needs, e.g. "cp311-manylinux_2_36_x86_64"."""
        return f"cp{self.minor.replace('.', '')}-manylinux_{self.glibc.replace('.', '_')}_{self.machine}"


@dataclass(frozen=True)
class VenvState:
    """What is in an existing venv (read as data by the host's python3: nothing of the venv is run)."""

    python: str  # "3.11.2", from pyvenv.cfg
    owner: str  # of the venv's directory
    packages: Mapping[str, str] = field(default_factory=dict)  # canonical name -> version
    foreign: str | None = None  # the first path in the venv not owned by the venv's owner (e.g. pip ran as root)
    broken: str | None = None  # why it cannot be used as it is (no interpreter, no pyvenv.cfg version …); None: usable

    @property
    def minor(self) -> str:
        return ".".join(self.python.split(".")[:2])


def wheel_platforms(glibc: str, machine: str) -> tuple[str, ...]:
    """Every manylinux platform tag a host with this glibc accepts, newest first.

    `pip download --platform` takes tags literally (pip 23 expands only the legacy manylinux2014/2010 names), so the
    controller passes them all: manylinux_2_36_x86_64 … manylinux_2_5_x86_64 and the legacy aliases.
    """
    major, minor = (int(part) for part in glibc.split(".")[:2])
    if major != 2:
        raise ValueError(f"glibc {glibc}: only glibc 2.x is known to manylinux")
    tags = []
    for level in range(minor, 4, -1):
        tags.append(f"manylinux_2_{level}_{machine}")
        if machine in ("x86_64", "i686") and level in _LEGACY_MANYLINUX:
            tags.append(f"{_LEGACY_MANYLINUX[level]}_{machine}")
    return tuple(tags)


def requirement_met(spec: str, installed: Mapping[str, str]) -> bool:
    """Whether `spec` (e.g. "torch==2.13.0+rocm7.2") is met by the installed versions ({canonical name: version}).

    PEP 440: "==2.13.0" accepts 2.13.0+cpu (a local label is ignored when the specifier has none), "==2.13.0+rocm7.2"
    accepts only that build. A version that does not parse never meets anything.
    """
    requirement = Requirement(spec)
    have = installed.get(canonicalize_name(requirement.name))
    if have is None:
        return False
    try:
        return requirement.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return False


def unmet(requirements: Sequence[str], installed: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(spec for spec in requirements if not requirement_met(spec, installed))


def describe_installed(requirements: Sequence[str], installed: Mapping[str, str]) -> str:
    """ "torch 2.13.0+cpu (torch==2.13.0), bitsandbytes 0.50.1 (bitsandbytes==0.50.1)" """
    parts = []
    for spec in requirements:
        name = Requirement(spec).name
        parts.append(f"{name} {installed.get(canonicalize_name(name), 'missing')} ({spec})")
    return ", ".join(parts)


@dataclass(frozen=True)
class VenvPlan:
    # "create"; "recreate" (the owner remakes it in place); "replace" (root removes it, then it is created: it is
    # another account's, or holds another account's files, which neither the owner may keep nor root may chown — a
    # recursive chown as root of a tree someone else could change is how files outside it change hands); or None.
    action: str | None
    reason: str


def plan_venv(path: str, state: VenvState | None, host_python: HostPython | None, owner: str) -> VenvPlan:
    """What to do about the venv directory itself (not its packages)."""
    if state is not None and state.owner != owner:
        return VenvPlan("replace", f"the venv at {path} belongs to {state.owner}, not {owner}: replacing it")
    if state is not None and state.foreign:
        return VenvPlan("replace", f"{state.foreign} in the venv does not belong to {owner} (an interrupted run as "
                                   "another account?): replacing the venv")
    if state is not None and state.broken:
        return VenvPlan("recreate", f"the venv at {path} is broken ({state.broken}): recreating it")
    if state is None:
        return VenvPlan("create", f"no venv at {path}")
    if host_python is not None and state.minor != host_python.minor:
        return VenvPlan("recreate", f"the venv at {path} runs Python {state.python}, the host's python3 is "
                                    f"{host_python.version} (wheels are built per Python version): recreating it")
    return VenvPlan(None, f"venv {path} exists (Python {state.python}, owner {owner})")


# --- who can change the venv's path -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PathEntry:
    """One existing directory (or symlink) on the way to the venv, as `stat` saw it without following it."""

    path: str
    uid: int
    gid: int
    mode: int  # st_mode, file type bits included
    user: str  # the owner's name (or its uid when it has none)
    group: str

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)


@dataclass(frozen=True)
class PathAccess:
    """Who can write the directories leading to a venv: every existing ancestor of the path as written and of the
    path with its symlinks resolved, the venv owner's uid, and the accounts in each of their groups."""

    owner_uid: int | None  # None: the owner does not exist (preflight says so)
    entries: tuple[PathEntry, ...]
    group_accounts: Mapping[int, frozenset[str]] = field(default_factory=dict)  # gid -> members and primary users
    resolved_parent: str = ""  # the venv's parent with every symlink resolved (realpath -m)

    def owner_makes_it(self) -> bool:
        """Whether the deepest existing directory above the venv (resolved) is the owner's own: then the owner
        creates the venv (and any directory missing above it) and root does not act there."""
        chain = set(ancestors(posixpath.join(self.resolved_parent, "venv"))) if self.resolved_parent else set()
        existing = [entry for entry in self.entries if entry.path in chain and not entry.is_link]
        if not existing:
            return False
        deepest = max(existing, key=lambda entry: len(entry.path))
        return self.owner_uid not in (None, 0) and deepest.uid == self.owner_uid


def ancestors(path: str) -> tuple[str, ...]:
    """ "/opt/rocm-fleet/venv" -> ("/", "/opt", "/opt/rocm-fleet") """
    found = []
    current = posixpath.dirname(path)
    while True:
        found.append(current)
        if current == "/":
            break
        current = posixpath.dirname(current)
    return tuple(reversed(found))


def parse_path_access(lines: Sequence[str]) -> PathAccess:
    """Lines of the VenvPathAccess fact: `owner UID`, `resolved PATH`, `dir UID GID MODE_HEX USER GROUP PATH`,
    `group NAME:x:GID:MEMBERS`, `primary GID NAME`."""
    owner_uid = None
    resolved = ""
    entries = []
    groups: dict[int, set[str]] = {}
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "owner" and rest.strip().isdigit():
            owner_uid = int(rest)
        elif kind == "resolved":
            resolved = rest
        elif kind == "dir":
            uid, gid, mode, user, group, path = rest.split(" ", 5)
            entries.append(PathEntry(path, int(uid), int(gid), int(mode, 16), user, group))
        elif kind == "group":
            fields = rest.split(":")
            if len(fields) == 4 and fields[2].isdigit():
                groups.setdefault(int(fields[2]), set()).update(name for name in fields[3].split(",") if name)
        elif kind == "primary":
            gid, _, name = rest.partition(" ")
            if gid.isdigit() and name:
                groups.setdefault(int(gid), set()).add(name)
    return PathAccess(owner_uid, tuple(entries), {gid: frozenset(names) for gid, names in groups.items()}, resolved)


def venv_path_problem(path: str, owner: str, access: PathAccess) -> str | None:
    """Why `path` must not hold `owner`'s venv, or None.

    Each existing directory above the venv — on the path as written and with its symlinks resolved — must be writable
    by nobody but root and the owner: owned by one of them, not writable by every account (sticky or not: anyone could
    take the venv's name in /tmp first), and group-writable only by a group nobody else is in. Otherwise another
    account could rename the venv away and put its own in its place: the owner would run that account's code, and
    root's work on the path (creating, replacing the venv) would follow its symlinks. The owner's own directories are
    fine (a venv in the owner's home): root only reads there, and acts on the path from a directory it checked first.
    Not seen: ACLs and other LSM rules that grant more than the mode bits say.
    """
    allowed = {"root", owner}
    writers = "root" if owner == "root" else f"root and {owner}"
    if access.resolved_parent and not any(entry.path == "/" for entry in access.entries):
        # The fact ran but stat read nothing: refuse rather than pass what was not seen.
        return f"venv_path {path}: could not read who owns the directories above it (stat) — check coreutils on the host"
    for entry in access.entries:
        if entry.is_link:
            continue  # a symlink's own mode means nothing; who can replace it is its directory's question
        why = None
        if entry.uid not in (0, access.owner_uid):
            why = f"owned by {entry.user}"
        elif entry.mode & stat.S_IWOTH:
            why = "writable by every account"
        elif entry.mode & stat.S_IWGRP:
            others = sorted(access.group_accounts.get(entry.gid, frozenset()) - allowed)
            if others:
                why = f"writable by group {entry.group} ({', '.join(others)})"
        if why:
            return (f"venv_path {path}: {entry.path} is {why} — another account could swap the venv and have its code "
                    f"run as {owner}; use a venv_path whose directories only {writers} can write (e.g. "
                    f"/opt/rocm-fleet/venv), or fix {entry.path} (chown root: / chmod go-w)")
    return None
