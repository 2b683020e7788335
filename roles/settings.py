"""The inventory data contract: every key a deploy reads, its type, default (from roles/pins.py), meaning and validator.

`settings_for(host)` returns a frozen `HostSettings`; `require_valid_inventory()` checks every host of the run the
first time a deploy or task file is loaded and refuses the whole run — before any operation exists, let alone runs —
with one line naming the host, the key and the fix. Keys that pyinfra itself reads (`_sudo`, `ssh_*`, `fake_*` …)
and unrelated user keys pass untouched; an unknown key is refused only when it looks like a typo of one of ours.

`python -m roles.settings` prints the README's table of variables from this schema.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from pyinfra.api.exceptions import PyinfraError

from roles import pins
from roles.colliding_packages.data import COLLIDING_PACKAGES

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_BUILD = re.compile(r"\d{5,6}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# useradd's default NAME_REGEX on Debian/Ubuntu (a trailing $ is for machine accounts).
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}\$?")


class InventoryDataError(PyinfraError):
    """Inventory data that a deploy cannot use. A PyinfraError, so the pyinfra CLI prints it as one line and exits 1."""


class _Invalid(ValueError):
    """Raised by a validator: the message says what is wrong with the value and how to write it."""


# --- validators: each takes the raw value and returns the normalised one, or raises _Invalid ------------------------

def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"a {type(value).__name__} ({value!r})"


def _string(value: Any, example: str) -> str:
    if not isinstance(value, str):
        hint = ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # pyinfra's --data turns 7.2 into a float and 70204 into an int.
            hint = f" (on the command line, quote it twice: --data {{key}}='\"{example}\"')"
        raise _Invalid(f"got {_describe(value)}, expected a string such as {example!r}{hint}")
    return value


def release(value: Any) -> str:
    text = _string(value, "7.2.4")
    if not _RELEASE.fullmatch(text):
        raise _Invalid(f"got {text!r}, expected a release as MAJOR.MINOR.PATCH such as '7.2.4'")
    return text


def build_number(value: Any) -> str:
    text = _string(value, "70204")
    if not _BUILD.fullmatch(text):
        raise _Invalid(f"got {text!r}, expected AMD's build number (major*10000 + minor*100 + patch) such as '70204'")
    return text


def url(value: Any) -> str:
    text = _string(value, "https://repo.radeon.com")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text):
        raise _Invalid(f"got {text!r}, expected an http(s) URL such as 'https://repo.radeon.com'")
    return text.rstrip("/")


def optional_sha256(value: Any) -> str | None:
    if value is None:
        return None
    text = _string(value, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08").strip().lower()
    if not _SHA256.fullmatch(text):
        raise _Invalid(f"got {value!r}, expected a sha256 of 64 hex digits (sha256sum FILE), or None")
    return text


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"got {_describe(value)}, expected True or False")
    return value


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(f"got {_describe(value)}, expected a whole number >= 0")
    return value


def user_name(value: Any) -> str:
    text = _string(value, "alice")
    if not _USER_NAME.fullmatch(text):
        raise _Invalid(f"got {text!r}, expected a user name such as 'alice' (lower case, digits, '_' or '-')")
    return text


def user_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise _Invalid(f"got the string {value!r}, expected a list of user names such as [{value!r}]")
    if not isinstance(value, (list, tuple)):
        raise _Invalid(f"got {_describe(value)}, expected a list of user names such as ['alice']")
    return tuple(user_name(item) for item in value)


def absolute_path(value: Any) -> str:
    text = _string(value, "/opt/rocm-fleet/venv")
    if not text.startswith("/"):
        raise _Invalid(f"got the relative path {text!r}, expected an absolute path such as '/opt/rocm-fleet/venv'")
    normal = os.path.normpath(text)
    if normal != text.rstrip("/") or "\n" in text:
        raise _Invalid(f"got {text!r}, expected a plain absolute path without '..', '//' or '.' parts")
    return normal


def optional_absolute_path(value: Any) -> str | None:
    return None if value is None else absolute_path(value)


def optional_url(value: Any) -> str | None:
    return None if value is None else url(value)


def optional_listen_address(value: Any) -> str | None:
    if value is None:
        return None
    from roles.venv.wheelhouse_pull import split_address

    text = _string(value, "127.0.0.1:8765")
    try:
        split_address(text)
    except ValueError:
        raise _Invalid(f"got {text!r}, expected ADDRESS:PORT of this controller such as '127.0.0.1:8765' or "
                       "'[::1]:8765' (a port from 1 to 65535), or None") from None
    return text


def pip_requirement(value: Any) -> str:
    text = _string(value, pins.TORCH_SPEC)
    try:
        Requirement(text)
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]
        raise _Invalid(f"got {text!r}, not a pip requirement ({reason}); write one such as {pins.TORCH_SPEC!r}") from None
    return text


def python_version(value: Any) -> str:
    text = _string(value, pins.BITSANDBYTES_VERSION)
    try:
        Version(text)
    except InvalidVersion:
        raise _Invalid(f"got {text!r}, expected a version such as {pins.BITSANDBYTES_VERSION!r}") from None
    return text


def optional_text(value: Any) -> str | None:
    if value is None:
        return None
    text = _string(value, "torch 2.13.0 CPU, stand-in for the ROCm wheel")
    if not text.strip() or "\n" in text:
        raise _Invalid(f"got {text!r}, expected one line of text, or None")
    return text


def controller_path(value: Any) -> str:
    text = _string(value, "reports")
    if not text.strip() or "\n" in text:
        raise _Invalid(f"got {text!r}, expected a directory on the controller such as 'reports'")
    return text


def one_of(*choices: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise _Invalid(f"got {_describe(value)}, expected one of: {', '.join(repr(c) for c in choices)}")
        return value

    check.choices = choices  # type: ignore[attr-defined]
    return check


# --- the schema ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Key:
    name: str
    type: str  # as the README shows it
    default: Any
    validate: Callable[[Any], Any]
    meaning: str


SCHEMA: tuple[Key, ...] = (
    Key("rocm_install", '"install" \\| "skip"', "install", one_of("install", "skip"),
        meaning="`skip`: ROCm is managed elsewhere (test fleets): the colliding-packages and ROCm stages say so and "
                "install nothing (workstation_users still get render and video)"),
    Key("rocm_release", "str", pins.ROCM_RELEASE, release, meaning="ROCm release to install (MAJOR.MINOR.PATCH)"),
    Key("rocm_build", "str", pins.ROCM_BUILD, build_number,
        meaning="AMD's build number of that release, major·10000 + minor·100 + patch (checked against rocm_release)"),
    Key("repo_radeon_base_url", "URL", pins.REPO_RADEON_BASE_URL, url,
        meaning="base of AMD's repositories, or of a mirror of them: the installer deb and the apt lists use it"),
    Key("amdgpu_install_sha256", "str \\| None", None, optional_sha256,
        meaning="sha256 of the amdgpu-install deb for the host's codename; None: pins.AMDGPU_INSTALL_SHA256 or "
                "unchecked"),
    Key("amdgpu_driver_release", "str", pins.AMDGPU_DRIVER_RELEASE, release,
        meaning="release of AMD's `amdgpu` repository that goes with this ROCm (amdgpu.list)"),
    Key("rocm_other_release", '"stop" \\| "side-by-side"', "stop", one_of("stop", "side-by-side"),
        meaning="another ROCm release is installed: stop that host, or install this one beside it "
                "(`--rocmrelease`) and point /opt/rocm at it"),
    Key("colliding_packages", '"remove" \\| "stop"', "remove", one_of("remove", "stop"),
        meaning=f"distro packages ({', '.join(p.name for p in COLLIDING_PACKAGES)}) whose versions sort above AMD's "
                "and block amdgpu-install: remove them, or stop that host"),
    Key("gpu_required", "bool", True, boolean,
        meaning="preflight requires /dev/kfd and an AMD GPU on PCI (vendor 0x1002, display or accelerator class); "
                "False: test fleets and CPU-only hosts"),
    Key("min_free_disk_gb", "int", pins.MIN_FREE_DISK_GB, count,
        meaning=f"free GB needed on the filesystems of /opt and the venv while ROCm is still to be installed; once "
                f"it is there (or skipped), the venv's share ({pins.VENV_DISK_GB} GB, at most this)"),
    Key("workstation_users", "list of str", (), user_names,
        meaning="accounts added to the `render` and `video` groups (appended; existing groups are kept)"),
    Key("venv_path", "absolute path", pins.VENV_PATH, absolute_path, meaning="the venv with torch and bitsandbytes"),
    Key("venv_owner", "str", pins.VENV_OWNER, user_name, meaning="owner of the venv"),
    Key("torch_index_url", "URL", pins.TORCH_INDEX_URL, url, meaning="pip index that serves the torch ROCm wheels"),
    Key("torch_spec", "pip requirement", pins.TORCH_SPEC, pip_requirement, meaning="the torch requirement to install"),
    Key("torch_label", "str \\| None", None, optional_text,
        meaning="shown in reports and the fleet summary when torch is a stand-in (e.g. the CPU wheel on test fleets)"),
    Key("bitsandbytes_version", "str", pins.BITSANDBYTES_VERSION, python_version,
        meaning="bitsandbytes version (installed as ==VERSION)"),
    Key("wheelhouse", "absolute path \\| None", None, optional_absolute_path,
        meaning="controller directory: filled with pip on the controller, synced to the host, installed "
                "`--no-index`; None: the host's pip uses the indexes"),
    Key("wheelhouse_url", "URL \\| None", None, optional_url,
        meaning="pull mode: the hosts download the wheelhouse from this HTTP(S) server (it serves a copy of the "
                "`wheelhouse` directory: `URL/<set>/` lists the wheels; or it is the controller's own, "
                "`wheelhouse_serve`) and install each wheel only with the sha256 the controller computed; None: "
                "the controller uploads the wheelhouse to every host"),
    Key("wheelhouse_serve", "ADDRESS:PORT \\| None", None, optional_listen_address,
        meaning="pull mode from the controller: it serves `wheelhouse` over HTTP at this address while the run "
                "installs (started when the first host needs it, stopped at the end); hosts use "
                "`http://ADDRESS:PORT` unless `wheelhouse_url` names the controller as they reach it"),
    Key("stray_policy", '"report" \\| "remove"', "report", one_of("report", "remove"),
        meaning="distro ROCm packages: report them, or purge those nothing else needs"),
    Key("dpkg_lock_timeout", "int (seconds)", pins.DPKG_LOCK_TIMEOUT, count,
        meaning="how long apt waits for another apt/dpkg run to release the dpkg lock before the host fails"),
    Key("apt_hook", "bool", True, boolean, meaning="install the apt hook that re-checks linkage after every dpkg run"),
    Key("verify_device", '"auto" \\| "cpu"', "auto", one_of("auto", "cpu"),
        meaning="`cpu`: run the NF4 smoke test on the CPU (test fleets; the report says it is not a GPU pass)"),
    Key("reports_dir", "controller path", "reports", controller_path,
        meaning="where the controller writes reports/<host>.json and the fleet summary"),
)

KEYS = {key.name: key for key in SCHEMA}


@dataclass(frozen=True)
class HostSettings:
    """One host's validated inventory data, defaults filled in from roles/pins.py."""

    host: str
    rocm_install: str
    rocm_release: str
    rocm_build: str
    repo_radeon_base_url: str
    amdgpu_install_sha256: str | None
    amdgpu_driver_release: str
    rocm_other_release: str
    colliding_packages: str
    gpu_required: bool
    min_free_disk_gb: int
    workstation_users: tuple[str, ...]
    venv_path: str
    venv_owner: str
    torch_index_url: str
    torch_spec: str
    torch_label: str | None
    bitsandbytes_version: str
    wheelhouse: str | None
    wheelhouse_url: str | None
    wheelhouse_serve: str | None
    stray_policy: str
    dpkg_lock_timeout: int
    apt_hook: bool
    verify_device: str
    reports_dir: str


assert tuple(field.name for field in dataclasses.fields(HostSettings))[1:] == tuple(KEYS), "schema and HostSettings"


@dataclass(frozen=True)
class Problem:
    host: str
    key: str
    source: str  # where the value came from: "--data", "host data", "group data 'lab'"
    detail: str  # what is wrong and how to write it

    def line(self) -> str:
        return f"inventory data of host {self.host}, key {self.key} ({self.source}): {self.detail}"


def expected_build(release_text: str) -> str:
    major, minor, patch = (int(part) for part in release_text.split("."))
    return str(major * 10000 + minor * 100 + patch)


def check_data(host: str, data: dict[str, Any], source_of: Callable[[str], str] = lambda key: "inventory",
               foreign_keys: Iterable[str] = ()) -> tuple[HostSettings | None, tuple[Problem, ...]]:
    """Validate one host's data (pure). Returns the settings when there is no problem, and every problem found."""
    foreign = set(foreign_keys)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    for key in SCHEMA:
        raw = data.get(key.name, key.default)
        try:
            values[key.name] = key.validate(raw)
        except _Invalid as error:
            problems.append(Problem(host, key.name, source_of(key.name), str(error).replace("{key}", key.name)))
    if "rocm_release" in values and "rocm_build" in values:
        wanted = expected_build(values["rocm_release"])
        if values["rocm_build"] != wanted:
            problems.append(Problem(
                host, "rocm_build", source_of("rocm_build"),
                f"{values['rocm_build']!r} does not match rocm_release {values['rocm_release']!r}, whose build "
                f"number is {wanted!r}: set both together",
            ))
    problems.extend(_pull_problems(host, values, source_of))
    for name in sorted(data):
        if name in KEYS or name in foreign or name.startswith("_"):
            continue
        close = difflib.get_close_matches(name, KEYS, n=1, cutoff=0.8)
        if close:
            problems.append(Problem(host, name, source_of(name), f"unknown key, did you mean {close[0]}?"))
    if problems:
        return None, tuple(problems)
    return HostSettings(host=host, **values), ()


def _pull_problems(host: str, values: dict[str, Any], source_of: Callable[[str], str]) -> list[Problem]:
    """Pull mode needs the controller's wheelhouse (its hashes), and a server address the hosts can reach."""
    problems = []
    for key in ("wheelhouse_url", "wheelhouse_serve"):
        if values.get(key) is not None and "wheelhouse" in values and values["wheelhouse"] is None:
            problems.append(Problem(host, key, source_of(key),
                                    f"{values[key]!r} needs `wheelhouse` (the controller's directory, whose sha256 "
                                    "the hosts install with): set wheelhouse too, or set this to None"))
    serve = values.get("wheelhouse_serve")
    if serve is not None and values.get("wheelhouse_url") is None and "wheelhouse_url" in values:
        from roles.venv.wheelhouse_pull import split_address

        if split_address(serve)[0] in ("0.0.0.0", "::", ""):
            problems.append(Problem(host, "wheelhouse_serve", source_of("wheelhouse_serve"),
                                    f"{serve!r} listens on every address, which no host can connect to: set "
                                    "wheelhouse_url to the controller as the hosts reach it (e.g. "
                                    "'http://controller.lab:8765'), or serve on that address"))
    return problems


# --- pyinfra glue ----------------------------------------------------------------------------------------------------

@functools.cache  # the installed connectors do not change during a run; finding them is most of a host's check
def _pyinfra_keys() -> frozenset[str]:
    """Data keys pyinfra's connectors read (ssh_port, fake_responses, …): never ours, never typos of ours."""
    from pyinfra.api.connectors import get_all_connectors

    keys: set[str] = set()
    for connector in get_all_connectors().values():
        keys.update(getattr(connector, "data_meta", {}) or {})
    return frozenset(keys)


def _source_finder(host) -> Callable[[str], str]:
    inventory = host.inventory

    def source_of(key: str) -> str:
        if key in inventory.get_override_data():
            return "--data"
        if key in inventory.get_host_data(host.name):
            return "host data"
        for group in reversed(list(host.groups)):
            if key in inventory.get_group_data(group):
                return f"group data '{group}'"
        if key in (inventory.get_data() or {}):
            return "group data 'all'"
        return "default"

    return source_of


def check_host(host) -> tuple[HostSettings | None, tuple[Problem, ...]]:
    return check_data(host.name, host.data.dict(), _source_finder(host), _pyinfra_keys())


def settings_for(host) -> HostSettings:
    """The host's settings; raises InventoryDataError (one line naming host, key and fix) when its data is wrong."""
    settings, problems = check_host(host)
    if problems:
        raise InventoryDataError(_summary(problems))
    assert settings is not None
    return settings


def _summary(problems: tuple[Problem, ...]) -> str:
    first = problems[0].line()
    if len(problems) == 1:
        return first
    others = ", ".join(f"{p.host}/{p.key}" for p in problems[1:6]) + (" …" if len(problems) > 6 else "")
    return f"{first} (and {len(problems) - 1} more: {others})"


_checked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def require_valid_inventory(state=None) -> None:
    """Refuse the whole run when any host of it has unusable data. Call at the top of every deploy and task file.

    pyinfra executes a deploy file once per host (in parallel) after connecting and before any operation exists; the
    first call checks every host in the run, later calls reuse the verdict. Raising here aborts the CLI run with one
    line (`--> pyinfra error …: inventory data of host H, key K …`) and exit code 1, with nothing executed anywhere.
    """
    if state is None:
        from pyinfra.context import ctx_state

        state = ctx_state.get()
    verdict = _checked.get(state)
    if verdict is None:
        problems: list[Problem] = []
        for host in state.inventory:
            if state.is_host_in_limit(host):
                problems.extend(check_host(host)[1])
        verdict = _summary(tuple(problems)) if problems else ""
        _checked[state] = verdict
    if verdict:
        raise InventoryDataError(verdict)


def markdown_table() -> str:
    """The README's table of inventory variables."""
    lines = ["| Key | Type | Default | Meaning |", "|---|---|---|---|"]
    for key in SCHEMA:
        if key.default is None:
            default = "`None`"
        elif key.default == ():
            default = "`[]`"
        elif isinstance(key.default, str):
            default = f'`"{key.default}"`'
        else:
            default = f"`{key.default!r}`"
        lines.append(f"| `{key.name}` | {key.type} | {default} | {key.meaning} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
