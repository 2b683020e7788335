"""The inventory data contract: every key a deploy reads, its type, default (from roles/pins.py), meaning and validator
(roles/validators.py).

`settings_for(host)` returns a frozen `HostSettings`; `require_valid_inventory()` checks every host of the run the
first time a deploy or task file is loaded and refuses the whole run — before any operation exists, let alone runs —
with one line naming the host, the key and the fix. Keys that pyinfra itself reads (`_sudo`, `ssh_*`, `fake_*` …)
and unrelated user keys pass untouched; an unknown key is refused only when it looks like a typo of one of ours.

Paths, URLs and versions that reach a host follow one character policy (validators.PLAIN_CHARACTERS): the line names
the first character outside it. A plain-http `repo_radeon_base_url` needs `amdgpu_install_sha256`: that deb's
checksum is the root of trust of every ROCm package apt installs after it (see `_unchecked_installer_over_http`).

`python -m roles.settings` prints the README's table of variables from this schema.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pyinfra.api.exceptions import PyinfraError

from roles import pins
from roles.colliding_packages.data import COLLIDING_PACKAGES
from roles.debian.os_support import SUPPORTED
from roles.rocm.model import installer_file_name
from roles.run_memory import memory_of
from roles.validators import (
    Invalid,
    absolute_path,
    boolean,
    build_number,
    controller_path,
    count,
    is_loopback,
    known_release,
    model_source,
    one_of,
    optional_absolute_path,
    optional_controller_directory,
    optional_listen_address,
    optional_sha256,
    optional_text,
    optional_url,
    pip_requirement,
    python_version,
    release,
    split_address,
    url,
    user_name,
    user_names,
)
from verify.stack.rocm_release import rocm_release


class InventoryDataError(PyinfraError):
    """Inventory data that a deploy cannot use. A PyinfraError, so the pyinfra CLI prints it as one line and exits 1."""


# --- the schema ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # as the README shows it
    default: Any
    validate: Callable[[Any], Any]
    meaning: str


SCHEMA: tuple[Key, ...] = (
    Key(
        "rocm_install",
        '"install" \\| "skip"',
        "install",
        one_of("install", "skip"),
        meaning="`skip`: ROCm is managed elsewhere (test fleets): the colliding-packages and ROCm stages say so and "
        "install nothing (workstation_users still get render and video)",
    ),
    Key(
        "rocm_release",
        "str",
        pins.ROCM_RELEASE,
        known_release,
        meaning="ROCm release to install (MAJOR.MINOR.PATCH), one of those in verify/stack/releases/",
    ),
    Key(
        "rocm_build",
        "str",
        pins.ROCM_BUILD,
        build_number,
        meaning="AMD's build number of that release, major·10000 + minor·100 + patch (checked against rocm_release)",
    ),
    Key(
        "repo_radeon_base_url",
        "URL",
        pins.REPO_RADEON_BASE_URL,
        url,
        meaning="base of AMD's repositories, or of a mirror of them: the installer deb and the apt lists use it; "
        "plain `http://` only together with amdgpu_install_sha256",
    ),
    Key(
        "amdgpu_install_sha256",
        "str \\| None",
        None,
        optional_sha256,
        meaning="sha256 of the amdgpu-install deb for the host's codename (the deb brings the keyring apt checks "
        "ROCm packages with); None: pins.AMDGPU_INSTALL_SHA256, else only TLS vouches for the download",
    ),
    Key(
        "amdgpu_driver_release",
        "str",
        pins.AMDGPU_DRIVER_RELEASE,
        release,
        meaning="release of AMD's `amdgpu` repository that goes with this ROCm (amdgpu.list)",
    ),
    Key(
        "rocm_other_release",
        '"stop" \\| "side-by-side"',
        "stop",
        one_of("stop", "side-by-side"),
        meaning="another ROCm release is installed: stop that host, or install this one beside it "
        "(`--rocmrelease`) and point /opt/rocm at it",
    ),
    Key(
        "colliding_packages",
        '"remove" \\| "stop"',
        "remove",
        one_of("remove", "stop"),
        meaning=f"distro packages ({', '.join(p.name for p in COLLIDING_PACKAGES)}) whose versions sort above AMD's "
        "and block amdgpu-install: remove them, or stop that host",
    ),
    Key(
        "gpu_required",
        "bool",
        True,
        boolean,
        meaning="preflight requires /dev/kfd and an AMD GPU on PCI (vendor 0x1002, display or accelerator class); "
        "False: test fleets and CPU-only hosts",
    ),
    Key(
        "min_free_disk_gb",
        "int",
        pins.MIN_FREE_DISK_GB,
        count,
        meaning=f"free GB needed on the filesystems of /opt and the venv while ROCm is still to be installed; once "
        f"it is there (or skipped), the venv's share ({pins.VENV_DISK_GB} GB, at most this)",
    ),
    Key(
        "workstation_users",
        "list of str",
        (),
        user_names,
        meaning="accounts added to the `render` and `video` groups (appended; existing groups are kept)",
    ),
    Key("venv_path", "absolute path", pins.VENV_PATH, absolute_path, meaning="the venv with torch and bitsandbytes"),
    Key(
        "venv_owner",
        "str",
        pins.VENV_OWNER,
        user_name,
        meaning="owner of the venv; pip and the runtime probe run as this account, added to `render` and `video` "
        "like workstation_users (unless root)",
    ),
    Key("torch_index_url", "URL", pins.TORCH_INDEX_URL, url, meaning="pip index that serves the torch ROCm wheels"),
    Key("torch_spec", "pip requirement", pins.TORCH_SPEC, pip_requirement, meaning="the torch requirement to install"),
    Key(
        "torch_label",
        "str \\| None",
        None,
        optional_text,
        meaning="shown in reports and the fleet summary when torch is a stand-in (e.g. the CPU wheel on test fleets)",
    ),
    Key(
        "bitsandbytes_version",
        "str",
        pins.BITSANDBYTES_VERSION,
        python_version,
        meaning="bitsandbytes version (installed as ==VERSION)",
    ),
    Key(
        "wheelhouse",
        "absolute path \\| None",
        None,
        optional_controller_directory,
        meaning="controller directory: filled with pip on the controller, synced to the host, installed "
        "`--no-index`; None: the host's pip uses the indexes",
    ),
    Key(
        "wheelhouse_url",
        "URL \\| None",
        None,
        optional_url,
        meaning="pull mode: the hosts download the wheelhouse from this HTTP(S) server (it serves a copy of the "
        "`wheelhouse` directory: `URL/<set>/` lists the wheels; or it is the controller's own, "
        "`wheelhouse_serve`) and install each wheel only with the sha256 the controller computed; None: "
        "the controller uploads the wheelhouse to every host",
    ),
    Key(
        "wheelhouse_serve",
        "ADDRESS:PORT \\| None",
        None,
        optional_listen_address,
        meaning="pull mode from the controller: it serves `wheelhouse` over HTTP at this address while the run "
        "installs (started when the first host needs it, stopped at the end); hosts use "
        "`http://ADDRESS:PORT` unless `wheelhouse_url` names the controller as they reach it",
    ),
    Key(
        "wheelhouse_seed",
        "host name \\| None",
        None,
        optional_text,
        meaning="relay mode: this inventory host gets the wheelhouse pushed (as without pull mode) and serves it, "
        "while the run installs, to the other hosts, which pull it from `wheelhouse_seed_serve` and install "
        "each wheel only with the sha256 the controller computed: the wheelhouse passes through the "
        "controller once. The seed must be in the run and share the others' Python and glibc",
    ),
    Key(
        "wheelhouse_seed_serve",
        "ADDRESS:PORT \\| None",
        None,
        optional_listen_address,
        meaning="relay mode: where the seed serves (as `nobody`), an address of the seed the other hosts reach; "
        "they pull from `http://ADDRESS:PORT`",
    ),
    Key(
        "stray_policy",
        '"report" \\| "remove"',
        "report",
        one_of("report", "remove"),
        meaning="distro ROCm packages: report them, or purge those nothing else needs",
    ),
    Key(
        "dpkg_lock_timeout",
        "int (seconds)",
        pins.DPKG_LOCK_TIMEOUT,
        count,
        meaning="how long apt waits for another apt/dpkg run to release the dpkg lock (and the apt hook stage for "
        "another rocm-fleet run on the same host) before the host fails",
    ),
    Key("apt_hook", "bool", True, boolean, meaning="install the apt hook that re-checks linkage after every dpkg run"),
    Key(
        "boot_check",
        "bool",
        True,
        boolean,
        meaning="install rocm-fleet-boot-check.service, which runs the full check (runtime and NF4 included) once per "
        "boot after the kernel or boot id changed; False removes it",
    ),
    Key(
        "max_result_age",
        "int (seconds)",
        pins.MAX_RESULT_AGE,
        count,
        meaning="the status task marks a host WARN (stale) when its newest full result — the verification's or the "
        "boot check's — is older than this (default 7 days); 0: never",
    ),
    Key(
        "new_users_gpu_groups",
        "bool",
        True,
        boolean,
        meaning="accounts made later with adduser join render and video (ADD_EXTRA_GROUPS=1, EXTRA_GROUPS in "
        "/etc/adduser.conf, as AMD's docs say)",
    ),
    Key(
        "verify_device",
        '"auto" \\| "cpu"',
        "auto",
        one_of("auto", "cpu"),
        meaning="`cpu`: run the NF4 smoke test on the CPU (test fleets; the report says it is not a GPU pass)",
    ),
    Key(
        "node_exporter_textfile_dir",
        "absolute path \\| None",
        pins.NODE_EXPORTER_TEXTFILE_DIR,
        optional_absolute_path,
        meaning="where the verification, the apt hook and the boot check write `rocm_fleet.prom` for node_exporter's "
        "textfile collector (only when the directory exists: node_exporter's package makes it); None: no "
        "metrics file",
    ),
    Key(
        "verify_model",
        '"off" \\| "synthetic" \\| absolute path',
        "synthetic",
        model_source,
        meaning="the model check after NF4: a 4-bit NF4 causal LM through Transformers on each GPU NF4 passed on, "
        "run as venv_owner (refused while that is root) — `synthetic`: a small seeded Llama built on the "
        "host; a path: a checkpoint directory on the host (safetensors, readable by venv_owner); `off`: none, "
        "and no Transformers in the venv",
    ),
    Key(
        "reports_dir",
        "controller path",
        "reports",
        controller_path,
        meaning="where the controller writes reports/<host>.json and the fleet summary",
    ),
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
    wheelhouse_seed: str | None
    wheelhouse_seed_serve: str | None
    stray_policy: str
    dpkg_lock_timeout: int
    apt_hook: bool
    boot_check: bool
    max_result_age: int
    new_users_gpu_groups: bool
    verify_device: str
    node_exporter_textfile_dir: str | None
    verify_model: str
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
    return rocm_release(release_text).build


def _installer_codenames() -> frozenset[str]:
    return frozenset(s.installer_codename for s in SUPPORTED.values() if s.installer_codename)


def _unchecked_installer_over_http(values: dict[str, Any]) -> str:
    """Why the installer deb would come over plain http with nothing to check it against ("" when it would not).

    That deb installs the keyring apt checks every ROCm package's signature with: over http, its sha256 is the only
    thing that proves the keyring (and so every package after it) is AMD's. TLS does that job for an https mirror.
    """
    base, sha256 = values.get("repo_radeon_base_url"), values.get("amdgpu_install_sha256", "")
    if base is None or urlsplit(base).scheme != "http" or sha256 is not None:
        return ""
    if _installer_codenames() <= set(pins.AMDGPU_INSTALL_SHA256):
        return ""  # roles/pins.py has the deb's sha256 for every codename the deploy downloads it for
    deb = installer_file_name(values.get("rocm_release", pins.ROCM_RELEASE), values.get("rocm_build", pins.ROCM_BUILD))
    return (
        f"{base!r} is plain http and amdgpu_install_sha256 is None: nothing would check {deb}, which brings the "
        "keyring apt trusts for every ROCm package — set amdgpu_install_sha256 (sha256sum of that deb from "
        "repo.radeon.com), or use an https mirror"
    )


def check_data(
    host: str,
    data: dict[str, Any],
    source_of: Callable[[str], str] = lambda key: "inventory",
    foreign_keys: Iterable[str] = (),
) -> tuple[HostSettings | None, tuple[Problem, ...]]:
    """Validate one host's data (pure). Returns the settings when there is no problem, and every problem found."""
    foreign = set(foreign_keys)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    for key in SCHEMA:
        raw = data.get(key.name, key.default)
        try:
            values[key.name] = key.validate(raw)
        except Invalid as error:
            problems.append(Problem(host, key.name, source_of(key.name), str(error).replace("{key}", key.name)))
    if "rocm_release" in values and "rocm_build" in values:
        wanted = expected_build(values["rocm_release"])
        if values["rocm_build"] != wanted:
            problems.append(
                Problem(
                    host,
                    "rocm_build",
                    source_of("rocm_build"),
                    f"{values['rocm_build']!r} does not match rocm_release {values['rocm_release']!r}, whose build "
                    f"number is {wanted!r}: set both together",
                )
            )
    problems.extend(_pull_problems(host, values, source_of))
    problems.extend(_loopback_serve_problems(host, values, data.get("ssh_hostname") or host, source_of))
    insecure = _unchecked_installer_over_http(values)
    if insecure:
        problems.append(Problem(host, "repo_radeon_base_url", source_of("repo_radeon_base_url"), insecure))
    for name in sorted(data):
        if name in KEYS or name in foreign or name.startswith("_"):
            continue
        close = difflib.get_close_matches(name, KEYS, n=1, cutoff=0.8)
        if close:
            problems.append(Problem(host, name, source_of(name), f"unknown key, did you mean {close[0]}?"))
    if problems:
        return None, tuple(problems)
    return HostSettings(host=host, **values), ()


def _every_address(listen: str) -> bool:
    """Whether ADDRESS:PORT listens on every address (0.0.0.0, ::): a server can, but no client can connect there."""
    return split_address(listen)[0] in ("0.0.0.0", "::", "")


def _pull_problems(host: str, values: dict[str, Any], source_of: Callable[[str], str]) -> list[Problem]:
    """Pull mode needs the controller's wheelhouse (its hashes), and a server address the hosts can reach."""
    problems = []
    for key in ("wheelhouse_url", "wheelhouse_serve"):
        if values.get(key) is not None and "wheelhouse" in values and values["wheelhouse"] is None:
            problems.append(
                Problem(
                    host,
                    key,
                    source_of(key),
                    f"{values[key]!r} needs `wheelhouse` (the controller's directory, whose sha256 "
                    "the hosts install with): set wheelhouse too, or set this to None",
                )
            )
    seed, seed_serve = values.get("wheelhouse_seed"), values.get("wheelhouse_seed_serve")
    if seed is not None and "wheelhouse" in values and values["wheelhouse"] is None:
        problems.append(
            Problem(
                host,
                "wheelhouse_seed",
                source_of("wheelhouse_seed"),
                f"{seed!r} needs `wheelhouse` (the controller's directory that the seed gets and "
                "serves): set wheelhouse too, or set this to None",
            )
        )
    if (seed is None) != (seed_serve is None) and {"wheelhouse_seed", "wheelhouse_seed_serve"} <= set(values):
        given, missing = (
            ("wheelhouse_seed", "wheelhouse_seed_serve")
            if seed is not None
            else ("wheelhouse_seed_serve", "wheelhouse_seed")
        )
        problems.append(
            Problem(
                host,
                missing,
                source_of(missing),
                f"None, but {given} is set: relay mode needs both — the seed host's name and where "
                "it serves (ADDRESS:PORT of the seed), or neither",
            )
        )
    if seed is not None:
        for key in ("wheelhouse_url", "wheelhouse_serve"):
            if values.get(key) is not None:
                problems.append(
                    Problem(
                        host,
                        key,
                        source_of(key),
                        f"{values[key]!r} and wheelhouse_seed {seed!r} both say where the hosts pull "
                        "from: set one of them, the other to None",
                    )
                )
    if seed_serve is not None and _every_address(seed_serve):
        problems.append(
            Problem(
                host,
                "wheelhouse_seed_serve",
                source_of("wheelhouse_seed_serve"),
                f"{seed_serve!r} is every address of the seed, which no host can connect to: give "
                "the seed's address that the other hosts reach, such as '10.0.0.11:8765'",
            )
        )
    serve = values.get("wheelhouse_serve")
    if serve is not None and values.get("wheelhouse_url") is None and "wheelhouse_url" in values:
        if _every_address(serve):
            problems.append(
                Problem(
                    host,
                    "wheelhouse_serve",
                    source_of("wheelhouse_serve"),
                    f"{serve!r} listens on every address, which no host can connect to: set "
                    "wheelhouse_url to the controller as the hosts reach it (e.g. "
                    "'http://controller.lab:8765'), or serve on that address",
                )
            )
    return problems


def _loopback_serve_problems(
    host: str, values: dict[str, Any], address: str, source_of: Callable[[str], str]
) -> list[Problem]:
    """A server on the controller's loopback serves only this machine: hosts elsewhere reach it only through a forward
    that wheelhouse_url names (hosts that share this machine, e.g. the local test fleet, reach it directly)."""
    serve, url = values.get("wheelhouse_serve"), values.get("wheelhouse_url")
    if values.get("wheelhouse_seed") is not None:
        return []  # relay mode: wheelhouse_serve is refused on its own (_pull_problems)
    if serve is None or not is_loopback(split_address(serve)[0]) or is_loopback(str(address)):
        return []
    if url is not None and not is_loopback(urlsplit(url).hostname or ""):
        return []
    return [
        Problem(
            host,
            "wheelhouse_serve",
            source_of("wheelhouse_serve"),
            f"{serve!r} is a loopback address of the controller, which {host} ({address}) cannot reach: serve on an "
            "address of the controller that the hosts reach (e.g. '10.0.0.1:8765'), or set wheelhouse_url to the "
            "forward that reaches this one",
        )
    ]


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


def _seed_problems(
    state, host, settings: HostSettings, settings_of: Callable[[Any], HostSettings | None]
) -> list[Problem]:
    """Relay mode's seed must be a host of this run that gets this host's wheelhouse pushed: the others pull it from
    there. `settings_of(host)`: a host's settings as the run's check found them (None: refused)."""
    seed = settings.wheelhouse_seed
    if seed is None or seed == host.name:
        return []
    seed_host = state.inventory.get_host(seed, None)
    seed_settings = settings_of(seed_host) if seed_host is not None else None
    if seed_host is None:
        why = "is not a host of this inventory: name the inventory host that gets the wheelhouse and serves it"
    elif not state.is_host_in_limit(seed_host):
        why = "is not in this run (--limit): the other hosts pull the wheelhouse from it — run it with them"
    elif seed_settings is None:
        return []  # its own data is refused with its own line
    elif seed_settings.wheelhouse != settings.wheelhouse:
        why = (
            f"gets another wheelhouse ({seed_settings.wheelhouse!r}, this host's is {settings.wheelhouse!r}): give "
            "the seed and the hosts it serves the same one"
        )
    elif (seed_settings.wheelhouse_url, seed_settings.wheelhouse_serve) != (None, None) or (
        seed_settings.wheelhouse_seed not in (None, seed)
    ):
        why = (
            "pulls the wheelhouse itself (its wheelhouse_url, wheelhouse_serve or wheelhouse_seed), so it has no "
            "wheels to serve: the seed must get them pushed — set those to None for it"
        )
    else:
        return []
    return [Problem(host.name, "wheelhouse_seed", _source_finder(host)("wheelhouse_seed"), f"{seed!r} {why}")]


def require_valid_inventory(state=None) -> None:
    """Refuse the whole run when any host of it has unusable data. Call at the top of every deploy and task file.

    pyinfra executes a deploy file once per host (in parallel) after connecting and before any operation exists; the
    first call checks every host in the run, later calls reuse the verdict. Raising here aborts the CLI run with one
    line (`--> pyinfra error …: inventory data of host H, key K …`) and exit code 1, with nothing executed anywhere.
    """
    if state is None:
        from pyinfra.context import ctx_state

        state = ctx_state.get()
    memory = memory_of(state)
    if memory.inventory_refusal is None:
        checked = {host.name: check_host(host) for host in state.inventory if state.is_host_in_limit(host)}

        def settings_of(host) -> HostSettings | None:  # each host checked once, also when it is many hosts' seed
            return (checked[host.name] if host.name in checked else check_host(host))[0]

        problems: list[Problem] = []
        for host in state.inventory:
            if host.name in checked:
                settings, found = checked[host.name]
                problems.extend(found or _seed_problems(state, host, settings, settings_of))
        memory.inventory_refusal = _summary(tuple(problems)) if problems else ""
    if memory.inventory_refusal:
        raise InventoryDataError(memory.inventory_refusal)


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
