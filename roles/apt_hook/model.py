"""The apt hook on a host, as data: where its files go, the two hooks that run its check, and the shell commands that
install and remove them. Pure: no pyinfra, nothing run.

Every change to the dpkg database is re-checked, whatever made it (issue 26): `dpkg -i`, `dpkg --purge`, apt,
aptitude, unattended-upgrades. Two hooks run one script:
- dpkg's `post-invoke` runs after every dpkg run that can change packages (unpack, install, configure, remove, purge,
  triggers-only, add/remove-architecture), apt's runs of dpkg included. A front end that holds dpkg's lock tells
  dpkg so with DPKG_FRONTEND_LOCKED (dpkg's frontend-api.txt; apt >= 1.7 sets it for each dpkg it starts, and for its
  own Pre-/Post-Invoke): then this hook does nothing, and
- apt's `DPkg::Post-Invoke` runs the check once, after the last dpkg run of the front end's run (libapt's
  pkgDPkgPM::Go: apt, apt-get, aptitude, unattended-upgrades through python-apt).
So a `dpkg -i` is checked once, and an apt run that calls dpkg three times is checked once, at its end — never
half-way through, between its unpack and configure runs. A front end that sets DPKG_FRONTEND_LOCKED and runs no
DPkg::Post-Invoke (none is known) or a run killed between its dpkg runs leaves the check to the status task, which
says "packages changed since …" (roles/status/model.py).

Files on the host:
    /var/lib/rocm-fleet/apt-hook/hook.sh        the check both hooks run, with the host's settings baked in: it runs
                                                the installed verifier's current version (roles/verifier.py)
    /etc/dpkg/dpkg.cfg.d/rocm-fleet-verify     dpkg's `post-invoke` line: the script, unless a front end holds the lock
    /etc/apt/apt.conf.d/80rocm-fleet-verify     apt's `DPkg::Post-Invoke` line: the script
    /var/lib/rocm-fleet/apt-hook/last.json      the last result, and last-pass.json the last passing one (written
                                                by the hook itself, verify/report/hook_state.py)
The lines are short and fixed: dpkg reads its configuration in lines of at most 1023 bytes, and a longer one would
make every dpkg run fail ("unknown option"); the settings live in the script.

Every command that changes these files runs whole under the host's lock (roles/host_lock.py), and builds what it
writes under a private, unpredictable name (mktemp) before moving it into place: two runs on one host at once wait
for each other instead of mixing their files, and dpkg and apt never read half a file. The script is written before
the lines that run it, and removed after them.

The hooks never make dpkg or apt fail (both fail a run whose hook exits non-zero): a missing python3, verifier or
script prints one line, and `|| true` keeps their exit status whatever the check does.
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
DPKG_CONF_PATH = "/etc/dpkg/dpkg.cfg.d/rocm-fleet-verify"
DPKG_CONF_PARTIAL_PREFIX = "/etc/dpkg/.rocm-fleet-verify."
SCRIPT_PATH = f"{HOOK_DIR}/hook.sh"
SCRIPT_PARTIAL_PREFIX = f"{HOOK_DIR}/.hook.sh."
DPKG_LINE_LIMIT = 1023  # dpkg reads its configuration files with fgets into 1024 bytes (lib/dpkg/options.c)
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
    character policy (every character one that needs no quoting) before any host was touched: the script carries them
    as they are. The host's python3 is found on the host, not configured, so it is checked here, by the same rule (it
    sits unquoted in the script).
    """

    python: str
    question: Question

    def __post_init__(self) -> None:
        if not self.python.startswith("/") or shlex.quote(self.python) != self.python:
            raise HookSpecError(
                f"apt hook: the host's python3 is {self.python!r}, a path the hook's script cannot carry — "
                "install python3 as /usr/bin/python3 (apt-get install python3), or set apt_hook: False"
            )


def hook_command(spec: HookSpec) -> str:
    """The check (the script's command): the installed verifier's `apt-hook`, the host's current version."""
    run = verifier_command(
        "apt-hook", *spec.question.to_argv(QUESTION), python=spec.python, pinned=False, prefix=PREFIX
    )
    return (
        f"if [ ! -x {spec.python} ]; then "
        f"echo '{HOOK_PREFIX} not run - {spec.python} is missing (apt-get install python3, then run "
        f"tasks/apt_hook.py again)'; "
        f"else {run}; fi || true"
    )


def script_text(python: str, question: Question) -> str:
    """The whole /var/lib/rocm-fleet/apt-hook/hook.sh."""
    return (
        "#!/bin/sh\n"
        "# rocm-fleet apt hook (roles/apt_hook, installed by tasks/apt_hook.py; `apt_hook: False` in the inventory\n"
        "# removes it). Run after a dpkg run that changed packages: by dpkg's post-invoke when no front end holds\n"
        "# dpkg's lock (dpkg -i, dpkg --purge), else once at the end of the front end's run by apt's\n"
        f"# DPkg::Post-Invoke ({DPKG_CONF_PATH}, {CONF_PATH}).\n"
        "# It re-checks what the Python process of the venv would load (linkage, stray distro ROCm packages; no\n"
        "# torch import), warns when it got worse, and never makes dpkg or apt fail.\n"
        f"{hook_command(HookSpec(python, question))}\n"
    )


def _run_script() -> str:
    missing = f"{HOOK_PREFIX} not run - {SCRIPT_PATH} is missing (run tasks/apt_hook.py again)"
    return f"if [ -f {SCRIPT_PATH} ]; then /bin/sh {SCRIPT_PATH}; else echo {shlex.quote(missing)}; fi"


def apt_line() -> str:
    """What apt runs after the last dpkg run of its run (inside apt's double-quoted string: no double quote)."""
    return f"{_run_script()} || true"


def dpkg_line() -> str:
    """What dpkg runs after each of its runs: nothing while a front end holds the lock (its hook runs at its end)."""
    return f'[ -n "${{DPKG_FRONTEND_LOCKED:-}}" ] || {_run_script()} || true'


def config_text() -> str:
    """The whole /etc/apt/apt.conf.d/80rocm-fleet-verify."""
    return (
        "// rocm-fleet apt hook (roles/apt_hook, installed by tasks/apt_hook.py; `apt_hook: False` in the inventory\n"
        f"// removes it). After apt's last dpkg run: {SCRIPT_PATH}, which re-checks what the Python\n"
        "// process of the venv would load and warns here when it got worse. It never makes apt fail.\n"
        f'DPkg::Post-Invoke {{ "{apt_line()}"; }};\n'
    )


def dpkg_config_text() -> str:
    """The whole /etc/dpkg/dpkg.cfg.d/rocm-fleet-verify."""
    line = f"post-invoke={dpkg_line()}"
    assert len(line.encode()) < DPKG_LINE_LIMIT, "dpkg would read the hook line in two pieces and fail every run"
    return (
        "# rocm-fleet apt hook (roles/apt_hook, installed by tasks/apt_hook.py; `apt_hook: False` in the inventory\n"
        f"# removes it). After every dpkg run that no front end runs: {SCRIPT_PATH}, which re-checks\n"
        "# what the Python process of the venv would load and warns here when it got worse. Under apt (the front\n"
        "# end holds dpkg's lock: DPKG_FRONTEND_LOCKED) apt's DPkg::Post-Invoke runs it once, at the end\n"
        f"# ({CONF_PATH}). It never makes dpkg fail.\n"
        f"{line}\n"
    )


@dataclass(frozen=True)
class HookFile:
    path: str
    partial_prefix: str  # where it is built before it is moved into place (never in a directory dpkg or apt reads)
    text: str


def hook_files(spec: HookSpec) -> tuple[HookFile, ...]:
    """The hook's files, in the order they are written (the script before the lines that run it)."""
    return (
        HookFile(SCRIPT_PATH, SCRIPT_PARTIAL_PREFIX, script_text(spec.python, spec.question)),
        HookFile(DPKG_CONF_PATH, DPKG_CONF_PARTIAL_PREFIX, dpkg_config_text()),
        HookFile(CONF_PATH, CONF_PARTIAL_PREFIX, config_text()),
    )


def write_file_command(file: HookFile) -> str:
    """Replace one file in one step (dpkg and apt never read half of it). Run under the host lock: leftovers of a run
    killed halfway are removed first, as no other run is writing one."""
    directory = file.path.rsplit("/", 1)[0]
    return (
        f"mkdir -p {directory} && rm -f {file.partial_prefix}* && partial=$(mktemp {file.partial_prefix}XXXXXXXX) && "
        f'printf \'%s\' {shlex.quote(file.text)} > "$partial" && chmod 644 "$partial" && '
        f'mv -f "$partial" {file.path}'
    )


def baseline_command() -> str:
    """Run the check once, as the hooks will: it records the baseline the next dpkg run is compared with."""
    return f"/bin/sh {SCRIPT_PATH}"


def remove_command() -> str:
    """The lines first: dpkg and apt must never run a hook whose script is already gone. The results and the script go
    with the directory (the verifier stays: the other stages use it)."""
    return f"rm -f {DPKG_CONF_PATH} {DPKG_CONF_PARTIAL_PREFIX}* {CONF_PATH} {CONF_PARTIAL_PREFIX}* && rm -rf {HOOK_DIR}"
