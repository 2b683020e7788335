"""Who can write the directories leading to a path on the host — the venv's (pure), asked by preflight before any
stage changes anything and by the venv stage before it acts on the path.

The venv belongs to `venv_owner`, and its code runs as that account; an account that can rename a directory above
the venv could put its own venv in its place, and have its code run as the owner (and root's work on the path —
creating, replacing the venv — follow its symlinks). The VenvPathAccess fact (roles/debian/facts.py) `stat`s every
existing directory above the path, as written and resolved; `venv_path_problem` judges it.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


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
    """ "/opt/rocm-fleet/venv" -> ("/", "/opt", "/opt/rocm-fleet")"""
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
        return (
            f"venv_path {path}: could not read who owns the directories above it (stat) — check coreutils on the host"
        )
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
            return (
                f"venv_path {path}: {entry.path} is {why} — another account could swap the venv and have its code "
                f"run as {owner}; use a venv_path whose directories only {writers} can write (e.g. "
                f"/opt/rocm-fleet/venv), or fix {entry.path} (chown root: / chmod go-w)"
            )
    return None
