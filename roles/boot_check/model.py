"""The boot-time re-verification on a host, as data: the systemd unit that runs `verify boot-check` once per boot,
where its files go, and the shell commands that install and remove it. Pure: no pyinfra, nothing run.

Why: with `--no-dkms` the GPU depends on the kernel's in-box amdgpu driver, and a kernel an upgrade installed takes
effect at the next boot — which no deploy and no apt hook sees. The unit runs the full check (`verify check`'s
question, the same arguments as the verification stage: runtime and NF4 on every GPU) after each boot whose boot id or
kernel differs from the last result's, within a time limit derived from its own arguments (`start_limit_s`), and keeps
the result in /var/lib/rocm-fleet/boot-check/ (beside the apt hook's state); `tasks/verify.py` reads it back and the
controller's drift says what the reboot did.

Files on the host:
    /etc/systemd/system/rocm-fleet-boot-check.service                       the unit (Type=oneshot)
    /etc/systemd/system/multi-user.target.wants/rocm-fleet-boot-check.service   the link `systemctl enable` makes
    /var/lib/rocm-fleet/boot-check/last.json           the last result (verify/report/boot_state.py)
The link is made directly, as `systemctl enable` would: a host without a running systemd (a chroot, an image) gets the
same files, and `systemctl daemon-reload` runs only where systemd is PID 1. Ordering: after multi-user.target, so the
check (NF4 takes a while) never holds up the boot or the login screen, and after udev has triggered the devices; the
command itself waits for /dev/kfd when an AMD GPU is on PCI.
"""

from __future__ import annotations

import argparse
import math
import shlex

from roles.verifier import LAUNCHER, verifier_command
from verify.checks.host import STATIC_TIME_LIMIT
from verify.commands import boot_check
from verify.launcher import PREFIXES
from verify.report.boot_state import DEFAULT_DIR as BOOT_CHECK_STATE_DIR

UNIT_NAME = "rocm-fleet-boot-check.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
WANTS_LINK = f"/etc/systemd/system/multi-user.target.wants/{UNIT_NAME}"
STATE_DIR = BOOT_CHECK_STATE_DIR  # where `verify boot-check` keeps its result, and the status task reads it
DRIVER_WAIT_S = 120  # how long the command waits for /dev/kfd after boot (udev loads amdgpu)
PROBE_LIMIT_S = 900  # the runtime probe's limit: runtime, maps and NF4 (verify check --timeout)
MODEL_LIMIT_S = 600  # the model check's limit (verify check --model-timeout)
# Beyond the limits the command's arguments set: the interpreter's start, reading the last result, writing this one
# and the metrics file.
MARGIN_S = 120


def boot_check_arguments(check_arguments: list[str]) -> list[str]:
    """`verify boot-check` arguments from the verification stage's `verify check` arguments (the same question:
    roles/verification/deploy.py's check_arguments, `--metrics-dir` included), with the boot check's own limits and
    state directory. What is `check`'s own goes: `--json`, and `--keep-in DIR` (the boot check keeps its result in
    its state directory, never as the verification's report)."""
    arguments = [a for a in check_arguments if a != "--json"]
    if "--keep-in" in arguments:
        at = arguments.index("--keep-in")
        del arguments[at : at + 2]
    if arguments[:1] == ["check"]:
        arguments = arguments[1:]
    return [
        "boot-check",
        *arguments,
        "--timeout",
        str(PROBE_LIMIT_S),
        "--model-timeout",
        str(MODEL_LIMIT_S),
        "--driver-wait",
        str(DRIVER_WAIT_S),
        "--state-dir",
        STATE_DIR,
    ]


def start_limit_s(arguments: list[str]) -> int:
    """TimeoutStartSec, from the unit's own `verify boot-check` arguments as the verifier's own parser reads them
    (its defaults for what they leave out): the wait for /dev/kfd, the static part's limit, the runtime probe's, the
    model check's when it runs (not `--model off`, not --static-only), and MARGIN_S. Whatever the arguments allow the
    command, systemd allows the unit: it is never killed while its own limits still hold."""
    parser = argparse.ArgumentParser(prog="verify")
    boot_check.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(arguments)
    model = 0.0 if args.model == "off" or args.static_only else args.model_timeout
    return math.ceil(args.driver_wait + STATIC_TIME_LIMIT + args.timeout + model + MARGIN_S)


def exec_start(python: str, arguments: list[str]) -> str:
    """The ExecStart line: the installed verifier's current version through its launcher (its sha256 checked first,
    as every caller does), in /bin/sh; systemd's own quoting (double quotes, backslash escapes)."""
    script = verifier_command(*arguments, python=python, pinned=False, prefix=PREFIXES["boot-check"])
    return " ".join(_systemd_word(word) for word in ("/bin/sh", "-c", script))


def _systemd_word(word: str) -> str:
    if word and all(c.isalnum() or c in "_./+@:,=-" for c in word):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def unit_text(python: str, arguments: list[str]) -> str:
    return (
        "# rocm-fleet (roles/boot_check, installed by tasks/boot_check.py; `boot_check: False` in the inventory\n"
        "# removes it). Once per boot whose boot id or kernel changed: the full check of the GPU stack\n"
        "# (kernel driver, linkage, runtime and NF4 on every GPU).\n"
        "# The result: /var/lib/rocm-fleet/boot-check/last.json.\n"
        "[Unit]\n"
        "Description=rocm-fleet: re-verify the GPU stack after a boot (amdgpu, linkage, runtime, NF4)\n"
        "After=multi-user.target systemd-udev-trigger.service local-fs.target\n"
        f"ConditionPathExists={LAUNCHER}\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={exec_start(python, arguments)}\n"
        f"TimeoutStartSec={start_limit_s(arguments)}\n"
        "Nice=10\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def install_commands(text: str) -> list[str]:
    """Write the unit in one step, link it as `systemctl enable` does, reload a running systemd."""
    partial = f"{UNIT_PATH}.rocm-fleet-new"
    return [
        f"printf %s {shlex.quote(text)} > {partial} && chmod 644 {partial} && mv -f {partial} {UNIT_PATH}",
        f"mkdir -p {WANTS_LINK.rsplit('/', 1)[0]} && ln -sfn ../{UNIT_NAME} {WANTS_LINK}",
        "if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi",
    ]


def remove_commands() -> list[str]:
    return [
        f"rm -f {WANTS_LINK} {UNIT_PATH} {UNIT_PATH}.rocm-fleet-new && rm -rf {STATE_DIR}",
        "if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi",
    ]
