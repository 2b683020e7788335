"""The apt hook on a host, as data: where its files go, the apt configuration that runs it, and the shell commands
that install and remove it. Pure: no pyinfra, nothing run.

Files on the host:
    /etc/apt/apt.conf.d/80rocm-fleet-verify     the `DPkg::Post-Invoke` line, with the host's settings baked in: it
                                                runs the installed verifier's current version (roles/verifier.py)
    /var/lib/rocm-fleet/apt-hook/last.json      the last result, and last-pass.json the last passing one (written
                                                by the hook itself, verify/report/hook_state.py)

Every command that changes these files runs whole under the host's lock (roles/host_lock.py), and builds what it
writes under a private, unpredictable name (mktemp) before moving it into place: two runs on one host at once wait
for each other instead of mixing their files, and apt never reads half a file.

The hook line never makes apt fail: a missing python3 or verifier prints one line, and `|| true` keeps apt's exit
status whatever the hook does (apt fails a run whose Post-Invoke command exits non-zero).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from roles.verifier import verifier_command
from verify.commands.apt_hook import PREFIX, QUESTION
from verify.question import Question
from verify.report.hook_state import DEFAULT_DIR as HOOK_DIR

CONF_PATH = "/etc/apt/apt.conf.d/80rocm-fleet-verify"
# Written next to apt.conf.d, not in it: apt reads every file there (and warns about odd names) while one is written.
CONF_PARTIAL_PREFIX = "/etc/apt/.80rocm-fleet-verify."
LOCK_WHAT = "the apt hook"  # what a run waiting for the host lock names (roles/host_lock.py)
STATE_FILE = f"{HOOK_DIR}/last.json"
HOOK_PREFIX = PREFIX  # every line the hook prints starts so


class HookSpecError(ValueError):
    """A value that cannot go into the hook line; the message names it and the fix."""


@dataclass(frozen=True)
class HookSpec:
    """What the hook line runs: the host's python3, and the question the verifier answers (the inventory's,
    verify/question.py; the hook asks its static part, verify.commands.apt_hook.QUESTION — with `metrics_dir` it
    rewrites node_exporter's rocm_fleet.prom there).

    The venv path and the versions come from the inventory, which roles/settings.py has already checked against its
    character policy (every character one that needs no quoting) before any host was touched: the line carries them
    as they are. The host's python3 is found on the host, not configured, so it is checked here, by the same rule (it
    sits unquoted in the line, inside apt's double-quoted string).
    """

    python: str
    question: Question

    def __post_init__(self) -> None:
        if not self.python.startswith("/") or shlex.quote(self.python) != self.python:
            raise HookSpecError(
                f"apt hook: the host's python3 is {self.python!r}, a path the apt configuration line cannot carry — "
                "install python3 as /usr/bin/python3 (apt-get install python3), or set apt_hook: False"
            )


def hook_command(spec: HookSpec) -> str:
    """The shell command apt runs after each dpkg run (and the deploy runs, to record the baseline): the installed
    verifier's `apt-hook`, the host's current version."""
    run = verifier_command(
        "apt-hook", *spec.question.to_argv(QUESTION), python=spec.python, pinned=False, prefix=PREFIX
    )
    return (
        f"if [ ! -x {spec.python} ]; then "
        f"echo '{HOOK_PREFIX} not run - {spec.python} is missing (apt-get install python3, then run "
        f"tasks/apt_hook.py again)'; "
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


def remove_command() -> str:
    """The configuration first: apt must never run a hook whose files are already gone. The results go with it (the
    verifier stays: the other stages use it)."""
    return f"rm -f {CONF_PATH} {CONF_PARTIAL_PREFIX}* && rm -rf {HOOK_DIR}"
