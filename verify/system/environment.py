"""The environment a user's Python really starts with: every place on a workstation that sets the loader's variables
(LD_LIBRARY_PATH, LD_PRELOAD) or bitsandbytes' BNB_ROCM_VERSION, read as data — nothing is sourced or run.

The static linkage check models a clean environment. A login does not have one:
    /etc/environment                       pam_env, every login (ssh, desktop): `NAME=VALUE`, no expansion
    /etc/environment.d/*.conf, /usr/lib/environment.d/*.conf, /usr/local/lib/environment.d/*.conf
                                           systemd's user manager (30-systemd-environment-d-generator): graphical
                                           sessions and user services; `NAME=VALUE` with $NAME / ${NAME} expansion
    /etc/profile.d/*.sh                    login shells (/etc/profile sources them in name order)
    <venv>/bin/activate                    `source bin/activate`
    /etc/ld.so.preload                     every process, whatever its environment (a whitespace or ':' list)
    systemd environment generators         programs (/etc/systemd/{system,user}-environment-generators,
                                           /usr/lib/systemd/…, /usr/local/lib/systemd/…): not run; the ones not known
                                           here are named, since what they set cannot be read
This module parses the simple forms — `[export] NAME=VALUE` with plain, single- or double-quoted values and the
expansions `$NAME`, `${NAME}`, `${NAME:-x}`, `${NAME:+x}` of the variable's value so far, `export NAME`, `unset NAME` —
and reports every other line that mentions one of the variables as not understood (a command substitution, an `if`
whose condition decides it …), so that nothing is silently assumed. An assignment inside an if/case/loop/function
block is taken but marked conditional. A shell assignment that is never exported does not reach Python: recorded,
not applied.

Order of application (what a login shell that activates the venv ends up with): /etc/environment, environment.d,
profile.d, activate. `Setting.value` is the variable's value after that line, the earlier sources applied.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from verify.ld.fsview import FileSystemView
from verify.ld.ldcache import read_ld_so_conf
from verify.system.textfiles import list_dir, read_optional

WATCHED = ("LD_LIBRARY_PATH", "LD_PRELOAD", "BNB_ROCM_VERSION")
ENVIRONMENT_D_DIRS = ("/etc/environment.d", "/usr/lib/environment.d", "/usr/local/lib/environment.d")
GENERATOR_DIRS = tuple(
    f"{base}/{kind}-environment-generators"
    for base in ("/etc/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd", "/lib/systemd")
    for kind in ("system", "user")
)
# Generators shipped by Debian/Ubuntu packages whose behaviour is known: systemd's reads environment.d (parsed here);
# gnupg's sets SSH_AUTH_SOCK only.
KNOWN_GENERATORS = frozenset({"30-systemd-environment-d-generator", "90gpg-agent"})
LD_SO_PRELOAD = "/etc/ld.so.preload"
LD_SO_CONF = "/etc/ld.so.conf"

_NAME = "|".join(WATCHED)
_MENTION = re.compile(rf"\b({_NAME})\b")
_ASSIGN = re.compile(rf"^(?:(export|declare -x|typeset -x)\s+)?({_NAME})=(.*)$")
_EXPORT_ONLY = re.compile(rf"^(?:export|declare -x|typeset -x)\s+((?:(?:{_NAME})\s*)+)$")
_OTHER_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")
_UNSET = re.compile(rf"^unset\s+((?:(?:{_NAME})\s*)+)$")
_EXPANSION = re.compile(r"\$\{(\w+)(?:(:[-+])([^}]*))?\}|\$(\w+)")
_OPENERS = re.compile(r"^(if|case|for|while|until|select)\b|\(\)\s*\{?$|^\{$|^function\s")
_CLOSERS = re.compile(r"^(fi|esac|done|\})\b")


@dataclass(frozen=True)
class Setting:
    """One line that sets (or unsets) a watched variable."""

    where: str  # "/etc/environment:3"
    name: str
    value: str | None  # after this line, earlier sources applied; None: unset
    line: str
    exported: bool = True  # reaches the processes started from there
    conditional: bool = False  # inside an if/case/loop/function: may not apply

    def describe(self) -> str:
        said = f"{self.name}={self.value}" if self.value is not None else f"unset {self.name}"
        notes = [n for n, on in (("conditional", self.conditional), ("not exported", not self.exported)) if on]
        return f"{said} ({self.where}{': ' + ', '.join(notes) if notes else ''})"

    def to_json(self) -> dict:
        return {
            "where": self.where,
            "name": self.name,
            "value": self.value,
            "line": self.line,
            "exported": self.exported,
            "conditional": self.conditional,
        }


@dataclass(frozen=True)
class Unparsed:
    where: str
    line: str

    def describe(self) -> str:
        return f"{self.where}: {self.line!r}"


@dataclass(frozen=True)
class LoaderEnvironment:
    """Everything found, in the order it applies."""

    settings: tuple[Setting, ...]
    unparsed: tuple[Unparsed, ...]
    preload: tuple[str, ...]  # /etc/ld.so.preload entries
    unknown_generators: tuple[str, ...]  # environment generator programs whose output cannot be known without running
    rocm_conf_dirs: tuple[str, ...]  # ld.so.conf(.d) directories that hold ROCm (ldconfig puts them in the cache)
    unreadable: tuple[str, ...]
    sources: tuple[str, ...]  # every file read

    def applied(self, name: str) -> list[Setting]:
        return [s for s in self.settings if s.name == name and s.exported]

    def to_json(self) -> dict:
        return {
            "settings": [s.to_json() for s in self.settings],
            "unparsed": [u.describe() for u in self.unparsed],
            "ld_so_preload": list(self.preload),
            "unknown_generators": list(self.unknown_generators),
            "rocm_ld_so_conf_dirs": list(self.rocm_conf_dirs),
            "unreadable": list(self.unreadable),
            "sources": list(self.sources),
        }


def _unquote(text: str, current: dict[str, str | None], expand: bool) -> str | None:
    """The value of a right-hand side in one of the simple forms; None when it is not one."""
    text = text.strip()
    if text.startswith("'"):
        return text[1:-1] if len(text) >= 2 and text.endswith("'") and "'" not in text[1:-1] else None
    if text.startswith('"'):
        if not (len(text) >= 2 and text.endswith('"')) or '"' in text[1:-1].replace('\\"', ""):
            return None
        body = text[1:-1]
    else:
        body = text
        if re.search(r"[\s;&|<>()'\"]", body):
            return None
    if "`" in body or "$(" in body:
        return None
    return _expand(body, current) if expand else body


def _expand(body: str, current: dict[str, str | None]) -> str | None:
    unknown = False

    def replace(match: re.Match) -> str:
        nonlocal unknown
        name = match.group(1) or match.group(4)
        if name not in current and name not in WATCHED:
            unknown = True  # $HOME, $VIRTUAL_ENV …: its value is not known here
            return match.group(0)
        value = current.get(name) or ""
        operator, word = match.group(2), match.group(3) or ""
        if operator == ":-":
            return value or _expand(word, current) or ""
        if operator == ":+":
            return (_expand(word, current) or "") if value else ""
        return value

    expanded = _EXPANSION.sub(replace, body)
    return None if unknown else expanded


def parse_assignments(
    text: str, where: str, current: dict[str, str | None], *, shell: bool, expand: bool
) -> tuple[list[Setting], list[Unparsed]]:
    """Settings of watched variables in one file; `current` (name → value) is updated as lines apply.
    `shell`: sh syntax (export, unset, blocks, exported-ness); otherwise the KEY=VALUE files (pam_env, environment.d),
    whose every assignment is exported."""
    settings, unparsed = [], []
    exported = {name for name, value in current.items() if value is not None}
    depth = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if shell:
            code = line.split(" #", 1)[0].strip()
            for part in (p.strip() for p in code.split(";")):
                if _CLOSERS.match(part):
                    depth = max(0, depth - 1)
                if _OPENERS.search(part):
                    depth += 1
        if not _MENTION.search(line):
            if shell and depth == 0 and (other := _OTHER_ASSIGN.match(line)):
                # Other variables the watched ones may be built from ($VIRTUAL_ENV in activate).
                value = _unquote(other.group(2), current, expand)
                if value is not None:
                    current[other.group(1)] = value
            continue
        here = f"{where}:{number}"
        statements = [p.strip() for p in line.split(";") if p.strip()] if shell else [line]
        understood = True
        for statement in statements:
            statement = statement.rstrip("&").strip() if shell else statement
            if shell and not _MENTION.search(statement):
                if re.match(r"^(then|do|else|fi|done|esac|\{|\})$", statement):
                    continue
            if shell and (match := _UNSET.match(statement)):
                for name in match.group(1).split():
                    current[name] = None
                    exported.discard(name)
                    settings.append(Setting(here, name, None, line, True, depth > 0))
                continue
            if shell and (match := _EXPORT_ONLY.match(statement)):
                for name in match.group(1).split():
                    exported.add(name)
                    if current.get(name) is not None:
                        settings.append(Setting(here, name, current[name], line, True, depth > 0))
                continue
            match = _ASSIGN.match(statement)
            if match is None or (match.group(1) and not shell):
                if not shell and match is None and statement.startswith("export "):
                    match = _ASSIGN.match(statement[len("export ") :].strip())  # pam_env accepts `export `
                if match is None:
                    understood = False
                    continue
            name = match.group(2)
            value = _unquote(match.group(3), current, expand)
            if value is None:
                understood = False
                continue
            if match.group(1) or not shell:
                exported.add(name)
            current[name] = value
            settings.append(Setting(here, name, value, line, name in exported, depth > 0))
        if not understood:
            unparsed.append(Unparsed(here, line))
    return settings, unparsed


def parse_preload(text: str) -> tuple[str, ...]:
    """/etc/ld.so.preload: file names separated by white space or ':' (glibc's rtld reads it so)."""
    return tuple(word for word in re.split(r"[\s:]+", text) if word)


def _is_rocm_dir(directory: str) -> bool:
    return "/rocm" in directory


def read_loader_environment(view: FileSystemView, venv_root: str) -> LoaderEnvironment:
    """Every source of the watched variables on the system `view` shows (image paths in what is reported)."""
    settings: list[Setting] = []
    unparsed: list[Unparsed] = []
    unreadable: list[str] = []
    sources: list[str] = []
    current: dict[str, str | None] = {}

    def read(path: str) -> str | None:
        text, error = read_optional(view.local(path))
        if error:
            unreadable.append(error)
        if text is not None:
            sources.append(path)
        return text

    def take(path: str, *, shell: bool, expand: bool) -> None:
        text = read(path)
        if text is not None:
            found, bad = parse_assignments(text, path, current, shell=shell, expand=expand)
            settings.extend(found)
            unparsed.extend(bad)

    take("/etc/environment", shell=False, expand=False)
    chosen: dict[str, str] = {}  # environment.d: a name in an earlier directory hides it in a later one
    for directory in ENVIRONMENT_D_DIRS:
        for name in list_dir(view.local(directory)):
            if name.endswith(".conf"):
                chosen.setdefault(name, f"{directory}/{name}")
    for name in sorted(chosen):
        take(chosen[name], shell=False, expand=True)
    for name in list_dir(view.local("/etc/profile.d")):
        if name.endswith(".sh"):
            take(f"/etc/profile.d/{name}", shell=True, expand=True)
    take(f"{venv_root.rstrip('/')}/bin/activate", shell=True, expand=True)

    preload_text = read(LD_SO_PRELOAD)
    preload = parse_preload(preload_text) if preload_text else ()
    generators = tuple(
        f"{directory}/{name}"
        for directory in GENERATOR_DIRS
        for name in list_dir(view.local(directory))
        if name not in KNOWN_GENERATORS
    )
    conf_dirs = read_ld_so_conf(LD_SO_CONF, lambda p: os.fspath(view.local(p)))
    return LoaderEnvironment(
        tuple(settings),
        tuple(unparsed),
        preload,
        generators,
        tuple(d for d in conf_dirs if _is_rocm_dir(d)),
        tuple(unreadable),
        tuple(sources),
    )
