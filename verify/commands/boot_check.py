"""`python -m verify boot-check --venv PATH --expect-rocm X.Y.Z …` — the full check once per boot (the systemd unit
rocm-fleet-boot-check.service runs it; roles/boot_check installs that).

With `--no-dkms` the GPU depends on the kernel's own amdgpu driver, and a kernel that an upgrade installed takes
effect only at the next boot. This command asks the question `verify check` asks (the same arguments: the runtime and
NF4 on every GPU included, the probe run as `--probe-user`, the venv's owner, never as root: see
verify/checks/probe_account.py) once per boot: when the boot id (/proc/sys/kernel/random/boot_id) or the running kernel
differs from its last result, else it says it already checked this boot and exits 0 (`--force` checks again). When an
AMD GPU is on the PCI bus and /dev/kfd is not there yet, it first waits for the driver (udev loads amdgpu during
boot), up to `--driver-wait` seconds, checking for /dev/kfd rather than sleeping a fixed time.

The result — the whole report, the boot id, the kernel and the kernel of the previous result — is kept in
`--state-dir` (/var/lib/rocm-fleet/boot-check/last.json, beside the apt hook's state), from where `verify check`
carries it into its report and the controller's drift says what the reboot did ("after the reboot into
6.8.0-51-generic the GPU is gone: …"), and the status task reads it as it is (verify/report/kept.py). With
`--metrics-dir DIR` it then rewrites node_exporter's DIR/rocm_fleet.prom from every result kept beside `--state-dir`
(a failure there is one more line). One line goes to stdout (the journal). Exit codes: 0 passed (warnings
allowed), 1 a check failed (also: already checked this boot, and it failed), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from verify.checks.probe_account import ProbeAccountError
from verify.commands import say
from verify.commands.check import add_arguments, options_from, refresh_metrics, run_checks
from verify.report.boot_state import DEFAULT_DIR, BootResult, BootState
from verify.report.hook_state import StateError
from verify.stack.venv_layout import VenvError
from verify.system.boot_id import BOOT_ID
from verify.system.boot_id import boot_id as running_boot_id
from verify.system.pci import amd_gpus

PREFIX = "rocm-fleet boot check:"  # = verify.launcher.PREFIXES["boot-check"]
DEFAULT_DRIVER_WAIT = 120.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "boot-check",
        help="the full check once per boot (the systemd unit runs it); the result is kept for the controller",
        description=__doc__.splitlines()[0],
    )
    add_arguments(parser)
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(DEFAULT_DIR),
        help=f"where the last result is kept (default {DEFAULT_DIR})",
    )
    parser.add_argument(
        "--driver-wait",
        type=float,
        default=DEFAULT_DRIVER_WAIT,
        metavar="SECONDS",
        help="with an AMD GPU on PCI, wait this long for /dev/kfd before checking",
    )
    parser.add_argument("--force", action="store_true", help="check even when this boot was already checked")
    parser.set_defaults(run=run)


def boot_id() -> str:
    return running_boot_id() or f"unknown (no {BOOT_ID})"


def wait_for_driver(
    seconds: float, kfd: str = "/dev/kfd", gpus=amd_gpus, clock=time.monotonic, pause=time.sleep
) -> bool:
    """True once `kfd` exists; False when no AMD GPU is on PCI (nothing to wait for) or `seconds` passed first."""
    if os.path.exists(kfd):
        return True
    if not gpus():
        return False
    deadline = clock() + seconds
    while clock() < deadline:
        pause(0.5)
        if os.path.exists(kfd):
            return True
    return False


def run(args: argparse.Namespace) -> int:
    options = options_from(args, "verify boot-check")
    if isinstance(options, str):
        say(options, error=True)
        return 2
    state = BootState(args.state_dir)
    this_boot, kernel = boot_id(), platform.release()
    try:
        last = state.last()
    except StateError as error:
        say(f"{PREFIX} {error}: this run's result replaces it")
        last = None
    if last is not None and (last.boot_id, last.kernel) == (this_boot, kernel) and not args.force:
        say(
            f"{PREFIX} already checked this boot ({kernel}, {last.checked_at}): {last.report.verdict.upper()} — "
            f"{last.report.reason}"
        )
        return 1 if last.report.failed else 0
    wait_for_driver(args.driver_wait)
    try:
        report = run_checks(options)
    except (VenvError, ProbeAccountError) as error:
        say(f"{PREFIX} no check — {error}")
        return 2
    result = BootResult(this_boot, kernel, report.generated_at, report, last.kernel if last is not None else None)
    try:
        state.record(result)
    except OSError as error:
        say(f"{PREFIX} could not keep the result in {args.state_dir} ({error.strerror or error})")
    # The metrics are made from every result kept beside the state directory (the verification's, the apt hook's).
    problem = refresh_metrics(args.metrics_dir, args.state_dir.parent)
    if problem is not None:
        say(f"{PREFIX} {problem}")
    after = f" (after {last.kernel})" if last is not None and last.kernel != kernel else ""
    say(f"{PREFIX} {kernel}{after}: {report.verdict.upper()} — {report.reason}")
    return 1 if report.failed else 0
