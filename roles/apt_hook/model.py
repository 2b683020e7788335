"""The apt hook on a host, as data: where its files go, the apt configuration that runs it, and the shell commands
that install, refresh and remove it. Pure: no pyinfra, nothing run.

Files on the host:
    /etc/apt/apt.conf.d/80rocm-fleet-verify     the `DPkg::Post-Invoke` line, with the host's settings baked in
    /var/lib/rocm-fleet/apt-hook/verifier/      the hook's own copy of the uploaded verifier (verify.pyz), unpacked
                                                and byte-compiled for the host's python3: imports from a zip are
                                                compiled on every run, which would cost each dpkg run about 0.4 s
    /var/lib/rocm-fleet/apt-hook/last.json      the last result, and last-pass.json the last passing one (written
                                                by the hook itself, verify/hook_state.py)

The hook line never makes apt fail: a missing python3 or a missing verifier copy prints one line, and `|| true`
keeps apt's exit status whatever the hook does (apt fails a run whose Post-Invoke command exits non-zero).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from roles.verifier import REMOTE_DIR, REMOTE_VERIFIER
from verify.commands.apt_hook import PREFIX as HOOK_PREFIX  # every line the hook prints starts so

CONF_PATH = "/etc/apt/apt.conf.d/80rocm-fleet-verify"
# Written next to apt.conf.d, not in it: apt reads every file there (and warns about odd names) while one is written.
CONF_PARTIAL = "/etc/apt/.80rocm-fleet-verify.partial"
HOOK_DIR = f"{REMOTE_DIR}/apt-hook"
VERIFIER_COPY = f"{HOOK_DIR}/verifier"
ENTRY = f"{VERIFIER_COPY}/verify/commands/apt_hook.py"
STAMP = f"{VERIFIER_COPY}/.source-sha256"
STATE_FILE = f"{HOOK_DIR}/last.json"

# The hook line sits in a double-quoted apt string and echoes paths inside single quotes: keep both intact.
_SAFE = re.compile(r"[A-Za-z0-9_./+@:,=-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HookSpecError(ValueError):
    """A setting that cannot go into the hook line; the message names it and the fix."""


@dataclass(frozen=True)
class HookSpec:
    """What the hook line runs: the host's python3, and the question the verifier answers."""

    python: str
    venv: str
    expect_rocm: str
    expect_bitsandbytes: str

    def __post_init__(self) -> None:
        # Named as the inventory names them (the host's python3 is found, not configured).
        for name, key in (("python", "the host's python3"), ("venv", "venv_path"), ("expect_rocm", "rocm_release"),
                          ("expect_bitsandbytes", "bitsandbytes_version")):
            value = getattr(self, name)
            if not _SAFE.fullmatch(value):
                raise HookSpecError(
                    f"apt hook: {key} {value!r} has characters the apt configuration line cannot carry — use only "
                    "letters, digits and _ . / + @ : , = - (or set apt_hook: False)"
                )
        if not self.python.startswith("/") or not self.venv.startswith("/"):
            raise HookSpecError(f"apt hook: python {self.python!r} and venv {self.venv!r} must be absolute paths")


def hook_command(spec: HookSpec) -> str:
    """The shell command apt runs after each dpkg run (and the deploy runs once, to record the baseline)."""
    run = " ".join(shlex.quote(part) for part in (
        spec.python, "-I", ENTRY, "--venv", spec.venv, "--expect-rocm", spec.expect_rocm,
        "--expect-bitsandbytes", spec.expect_bitsandbytes,
    ))
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
    """Replace the configuration file in one step (apt never reads half of it)."""
    return (f"printf '%s' {shlex.quote(text)} > {CONF_PARTIAL} && chmod 644 {CONF_PARTIAL} && "
            f"mv -f {CONF_PARTIAL} {CONF_PATH}")


def copy_verifier_command(python: str, sha256: str) -> str:
    """Unpack the uploaded verifier into the hook's copy and byte-compile it, after checking it is the one the
    controller built; the old copy is swapped out only once the new one is complete."""
    if not _SHA256.fullmatch(sha256):
        raise HookSpecError(f"apt hook: {sha256!r} is not a sha256")
    new, old = f"{VERIFIER_COPY}.new", f"{VERIFIER_COPY}.old"
    mismatch = (f"apt hook: {REMOTE_VERIFIER} is not the verifier this checkout built (sha256 {sha256[:12]}…) - "
                "run the deploy again")
    return " && ".join((
        f"mkdir -p {HOOK_DIR}",
        f"rm -rf {new} {old}",
        f"{{ echo '{sha256}  {REMOTE_VERIFIER}' | sha256sum --check --status || {{ echo '{mismatch}' >&2; false; }}; }}",
        f"{python} -I -m zipfile -e {REMOTE_VERIFIER} {new}",
        f"{python} -I -m compileall -q -d {VERIFIER_COPY} {new} > /dev/null",
        f"echo {sha256} > {new}/.source-sha256",
        f"{{ [ ! -d {VERIFIER_COPY} ] || mv {VERIFIER_COPY} {old}; }}",
        f"mv {new} {VERIFIER_COPY}",
        f"rm -rf {old}",
    ))


def remove_command() -> str:
    """The configuration first: apt must never run a hook whose files are already gone."""
    return f"rm -f {CONF_PATH} {CONF_PARTIAL} && rm -rf {HOOK_DIR}"
