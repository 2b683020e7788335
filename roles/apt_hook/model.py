"""The apt hook on a host, as data: where its files go, the apt configuration that runs it, and the shell commands
that install, refresh and remove it. Pure: no pyinfra, nothing run.

Files on the host:
    /etc/apt/apt.conf.d/80rocm-fleet-verify     the `DPkg::Post-Invoke` line, with the host's settings baked in
    /var/lib/rocm-fleet/apt-hook/verifier/      the hook's own copy of the uploaded verifier (verify.pyz), unpacked
                                                and byte-compiled for the host's python3: imports from a zip are
                                                compiled on every run, which would cost each dpkg run about 0.4 s;
                                                `.source-sha256` names the verify.pyz it came from and `.manifest`
                                                holds the sha256 of every file in it (sha256sum's format), so the
                                                fact can tell an intact copy from a damaged one by its content
    /var/lib/rocm-fleet/apt-hook/last.json      the last result, and last-pass.json the last passing one (written
                                                by the hook itself, verify/report/hook_state.py)

Every command that changes these files runs whole under the host's lock (roles/host_lock.py), and builds what it
writes under a private, unpredictable name (mktemp) before moving it into place: two runs on one host at once wait
for each other instead of mixing their files, and apt never reads half a file.

The hook line never makes apt fail: a missing python3 or a missing verifier copy prints one line, and `|| true`
keeps apt's exit status whatever the hook does (apt fails a run whose Post-Invoke command exits non-zero).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from roles.verifier import REMOTE_DIR, REMOTE_VERIFIER

CONF_PATH = "/etc/apt/apt.conf.d/80rocm-fleet-verify"
# Written next to apt.conf.d, not in it: apt reads every file there (and warns about odd names) while one is written.
CONF_PARTIAL_PREFIX = "/etc/apt/.80rocm-fleet-verify."
HOOK_DIR = f"{REMOTE_DIR}/apt-hook"
VERIFIER_COPY = f"{HOOK_DIR}/verifier"
# Where a new copy is built (mktemp -d), and the old one is moved before it is deleted.
WORK_PREFIX = f"{HOOK_DIR}/.verifier-work."
ENTRY = f"{VERIFIER_COPY}/verify/commands/apt_hook.py"
STAMP_NAME = ".source-sha256"
MANIFEST_NAME = ".manifest"
LOCK_WHAT = "the apt hook"  # what a run waiting for the host lock names (roles/host_lock.py)
STATE_FILE = f"{HOOK_DIR}/last.json"

HOOK_PREFIX = "rocm-fleet apt hook:"  # = verify.commands.apt_hook.PREFIX: every line the hook prints starts so
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HookSpecError(ValueError):
    """A value that cannot go into the hook line; the message names it and the fix."""


@dataclass(frozen=True)
class HookSpec:
    """What the hook line runs: the host's python3, and the question the verifier answers.

    The venv path and the versions come from the inventory, which roles/settings.py has already checked against its
    character policy (every character one that needs no quoting) before any host was touched: the line carries them
    as they are. The host's python3 is found on the host, not configured, so it is checked here, by the same rule (it
    sits unquoted in the line, inside apt's double-quoted string).
    """

    python: str
    venv: str
    expect_rocm: str
    expect_bitsandbytes: str
    metrics_dir: str | None = None  # node_exporter's textfile directory (the hook rewrites rocm_fleet.prom there)

    def __post_init__(self) -> None:
        if not self.python.startswith("/") or shlex.quote(self.python) != self.python:
            raise HookSpecError(
                f"apt hook: the host's python3 is {self.python!r}, a path the apt configuration line cannot carry — "
                "install python3 as /usr/bin/python3 (apt-get install python3), or set apt_hook: False"
            )


def hook_command(spec: HookSpec) -> str:
    """The shell command apt runs after each dpkg run (and the deploy runs once, to record the baseline)."""
    metrics = ("--metrics-dir", spec.metrics_dir) if spec.metrics_dir else ()
    run = " ".join(
        shlex.quote(part)
        for part in (
            spec.python,
            "-I",
            ENTRY,
            "--venv",
            spec.venv,
            "--expect-rocm",
            spec.expect_rocm,
            "--expect-bitsandbytes",
            spec.expect_bitsandbytes,
            *metrics,
        )
    )
    return (
        f"if [ ! -x {spec.python} ]; then "
        f"echo '{HOOK_PREFIX} not run - {spec.python} is missing (apt-get install python3, then run "
        f"tasks/apt_hook.py again)'; "
        f"elif [ ! -f {ENTRY} ]; then "
        f"echo '{HOOK_PREFIX} not run - {ENTRY} is missing (run tasks/apt_hook.py again, or set apt_hook: False)'; "
        f"else {run}; fi || true"
    )


def config_text(spec: HookSpec) -> str:
    """The whole /etc/apt/apt.conf.d/80rocm-fleet-verify."""
    return (
        "// rocm-fleet apt hook (roles/apt_hook, installed by tasks/apt_hook.py; `apt_hook: False` in the inventory\n"
        "// removes it). After every dpkg run: re-check what the Python process of the venv would load (linkage,\n"
        "// stray distro ROCm packages; no torch import) and warn here when it got worse. It never makes apt fail.\n"
        f'DPkg::Post-Invoke {{ "{hook_command(spec)}"; }};\n'
    )


def write_config_command(text: str) -> str:
    """Replace the configuration file in one step (apt never reads half of it). Run under the host lock: leftovers of
    a run killed halfway are removed first, as no other run is writing one."""
    return (
        f"rm -f {CONF_PARTIAL_PREFIX}* && partial=$(mktemp {CONF_PARTIAL_PREFIX}XXXXXXXX) && "
        f'printf \'%s\' {shlex.quote(text)} > "$partial" && chmod 644 "$partial" && '
        f'mv -f "$partial" {CONF_PATH}'
    )


WORK_COPY = '"$work/copy"'  # the new copy, in the shell of copy_verifier_command


def _manifest_of(directory: str) -> str:
    """sha256sum lines of every file under `directory` (its manifest left out), sorted by name."""
    return (
        f"( cd {directory} && find . -type f ! -path ./{MANIFEST_NAME} -print0 | LC_ALL=C sort -z | "
        "xargs -0 sha256sum )"
    )


def copy_verifier_command(python: str, sha256: str) -> str:
    """Unpack the uploaded verifier into the hook's copy and byte-compile it, after checking it is the one the
    controller built; then record what it came from and the sha256 of every file (the manifest). Built in a private
    directory from a private copy of verify.pyz (nothing can swap it between the check and the unpacking); the old
    copy is swapped out only once the new one is complete. Run under the host lock: leftovers of a run killed
    halfway are removed first, as no other run is building one."""
    if not _SHA256.fullmatch(sha256):
        raise HookSpecError(f"apt hook: {sha256!r} is not a sha256")
    mismatch = (
        f"apt hook: {REMOTE_VERIFIER} is not the verifier this checkout built (sha256 {sha256[:12]}…) - "
        "run the deploy again"
    )
    return " && ".join(
        (
            f"mkdir -p {HOOK_DIR}",
            f"rm -rf {WORK_PREFIX}*",
            f"work=$(mktemp -d {WORK_PREFIX}XXXXXXXX)",
            f'cp {REMOTE_VERIFIER} "$work/verify.pyz"',
            f'{{ echo "{sha256}  $work/verify.pyz" | sha256sum --check --status '
            f"|| {{ echo '{mismatch}' >&2; false; }}; }}",
            f'{python} -I -m zipfile -e "$work/verify.pyz" "$work/copy"',
            f'{python} -I -m compileall -q -d {VERIFIER_COPY} "$work/copy" > /dev/null',
            f'echo {sha256} > "$work/copy/{STAMP_NAME}"',
            f"{_manifest_of(WORK_COPY)} > {WORK_COPY}/{MANIFEST_NAME}",
            'chmod 755 "$work/copy"',
            f'{{ [ ! -d {VERIFIER_COPY} ] || mv {VERIFIER_COPY} "$work/old"; }}',
            f'mv "$work/copy" {VERIFIER_COPY}',
            'rm -rf "$work"',
        )
    )


def copy_state_command() -> str:
    """Shell that prints `verifier SHA` when the copy's files are exactly those its manifest lists, with those
    contents (SHA: the verify.pyz it came from), `verifier damaged` when a copy is there but differs from its
    manifest (a file changed, went missing or was added), and `verifier ` when there is no copy, or one without a
    manifest (made by an older version: replaced without a word)."""
    listed = f"cut -c 67- {MANIFEST_NAME} | LC_ALL=C sort"  # sha256sum's line: 64 hex digits, 2 spaces, the name
    present = f"find . -type f ! -path ./{MANIFEST_NAME} | LC_ALL=C sort"
    return (
        f"if [ ! -f {VERIFIER_COPY}/{MANIFEST_NAME} ] || [ ! -f {VERIFIER_COPY}/{STAMP_NAME} ]; then echo 'verifier '; "
        f"elif ( cd {VERIFIER_COPY} && sha256sum --check --strict --quiet {MANIFEST_NAME} > /dev/null 2>&1 && "
        f'[ "$({present})" = "$({listed})" ] ); then printf "verifier %s\n" "$(cat {VERIFIER_COPY}/{STAMP_NAME})"; '
        "else echo 'verifier damaged'; fi"
    )


def remove_command() -> str:
    """The configuration first: apt must never run a hook whose files are already gone."""
    return f"rm -f {CONF_PATH} {CONF_PARTIAL_PREFIX}* && rm -rf {HOOK_DIR}"
