"""`python -m verify check --venv PATH --expect-rocm 7.2.4 --expect-bitsandbytes 0.50.1 [--json]` — every check, one
report. What it is asked (verify/question.py) is what the inventory asks of a host: the verification stage passes it.

`CHECKS` is the list, in the order of the report; `run_checks` runs them into one report (the apt hook and the boot
check run it too). Each is a module of verify/checks/ with `run(host)`, its CheckResults, and `facts(host, results)`,
the report's facts it knows (what the fleet summary shows):
1. `linkage` — static linkage of python → torch → bitsandbytes' library, before anything is imported;
2. `versions` — installed versions; `strays` — stray distro ROCm packages; `environment` — what a login's
   environment (LD_LIBRARY_PATH, LD_PRELOAD, BNB_ROCM_VERSION) and the venv's amdsmi change; `apt` — AMD's pin and
   lists (with --expect-amd-repo); `kernel` — the amdgpu driver now and after the next boot;
3. `runtime` — the probe in the venv (torch, GPUs, bitsandbytes' library), `maps` — what the probe really mapped
   against the static prediction; 4. `nf4` — the NF4 smoke on each device; 5. `model` — a 4-bit causal LM through
   Transformers on each device NF4 passed on (with --model synthetic or PATH; its own run of the venv's python).
The static checks read files only (through verify/safe_read.py), within `CheckOptions.static_time_limit`: running out
of time is a failing check, not a hang. The runtime ones (model aside) share one run of the venv's python — none with
--static-only, nor when the static part ran out of time or found a library that is not a regular file (a FIFO would
block the probe's dlopen for ever). What several checks need is verify/checks/host.py's `Host`.

`--keep-in DIR` also keeps the report on the host, as DIR/last-verify.json (the verification stage passes
/var/lib/rocm-fleet, where the status task reads it back), and `--metrics-dir DIR` then rewrites node_exporter's
DIR/rocm_fleet.prom from every result kept there (verify/report/metrics.py). Both are written atomically under a
private name; a failure to write either is one line on stderr ("verify check: warning: …") and changes neither the
report nor the exit code.
`--model synthetic|PATH` adds the model check (verify/checks/model.py) after NF4; a --model that is not off,
synthetic or an absolute path, or a PATH that is no directory here, is bad usage.

Exit codes: 0 every check passed (warnings allowed), 1 a check failed, 2 bad usage (e.g. --venv is not a venv) —
`Report.exit_status` (verify/report/report.py), the same table the controller holds a report's exit status to.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from verify.checks import apt, environment, kernel, linkage, maps, model, nf4, runtime, strays, versions
from verify.checks.host import CheckOptions, Host
from verify.checks.probe_account import ProbeAccountError
from verify.commands import say, seconds, write_stdout
from verify.question import MODELS, Question, QuestionError
from verify.report.kept_files import VERIFY_REPORT, replace_file
from verify.report.metrics import FILE_NAME, write_metrics
from verify.report.report import FAIL, STATIC_CHECK_IDS, CheckResult, Facts, Report, build_report
from verify.safe_read import OutOfTime, time_limit
from verify.stack.rocm_release import UnknownRelease, known_releases
from verify.stack.venv_layout import VenvError

TOOL_VERSION = "0.1.0"

# What this module adds to the static part: a login's environment, AMD's apt pin and lists, the kernel —
# files read, and apt-cache run once with its own time limit (verify/checks/apt.py).
STATIC_CHECKS = (linkage, versions, strays, environment, apt, kernel)
RUNTIME_CHECKS = (runtime, maps, nf4, model)
CHECKS = STATIC_CHECKS + RUNTIME_CHECKS

_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}
MAX_TIMEOUT = 86400.0  # a day: an NF4 smoke test takes seconds


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="every check of a workstation: linkage, versions, strays, runtime, NF4, the 4-bit model",
        description=__doc__.splitlines()[0],
    )
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--keep-in",
        type=Path,
        metavar="DIR",
        help=f"also keep the report as DIR/{VERIFY_REPORT} (the verification stage: /var/lib/rocm-fleet)",
    )
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The question `check` answers (verify/question.py) and its time limits — shared by `boot-check`, which asks it
    once per boot."""
    Question.add_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=seconds(MAX_TIMEOUT),
        default=900.0,
        help=f"seconds the runtime probe may take (at most {MAX_TIMEOUT:g})",
    )
    parser.add_argument(
        "--model-timeout",
        type=seconds(MAX_TIMEOUT),
        default=600.0,
        help=f"seconds the model check may take (at most {MAX_TIMEOUT:g})",
    )


def options_from(args: argparse.Namespace, command: str = "verify check") -> CheckOptions | str:
    """The CheckOptions of these arguments, or the one line that says why they are bad usage."""
    try:
        question = Question.from_args(args)
    except QuestionError as error:
        return f"{command}: {error}"
    if question.expect_rocm not in known_releases():
        return f"{command}: --expect-rocm: {UnknownRelease.of(question.expect_rocm)}"
    if not question.root.is_dir():
        return f"{command}: --root {question.root} is not a directory"
    root = question.root.resolve()
    static_only = question.static_only or root != Path("/")
    if question.model not in MODELS and not static_only and not os.path.isdir(question.model):
        return f"{command}: --model {question.model}: no such directory on this host — give a checkpoint directory"
    return CheckOptions(
        **{**vars(question), "root": root, "static_only": static_only},
        timeout=args.timeout,
        model_timeout=args.model_timeout,
    )


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    if isinstance(options, str):
        say(options, error=True)
        return 2
    if args.metrics_dir is not None and args.keep_in is None:
        say(
            "verify check: --metrics-dir needs --keep-in (the metrics are made from the results kept there)", error=True
        )
        return 2
    try:
        report = run_checks(options)
    except (VenvError, ProbeAccountError) as error:
        say(f"verify check: {error}", error=True)
        return 2
    if args.keep_in is not None:
        keep(report, args.keep_in, args.metrics_dir)
    if args.json:
        write_stdout(json.dumps(report.to_json(), indent=1, sort_keys=False) + "\n")
    else:
        lines = [f"{report.host.hostname}: {report.verdict.upper()} — {report.reason}"]
        lines += [f"  {_MARK[check.status]}  {check.id}: {check.reason}" for check in report.checks]
        write_stdout("\n".join(lines) + "\n")
    return report.exit_status


def run_checks(options: CheckOptions) -> Report:
    """Every check, into one report. Raises venv_layout.VenvError for a --venv that is not a venv,
    rocm_release.UnknownRelease for an --expect-rocm without a release file. The report is timed when the checks start,
    before the host's files are read: a package change during the run is after it, so the status still sees it."""
    started = time.gmtime()
    host = Host(options)
    try:
        with time_limit(options.static_time_limit):
            checks = [result for check in STATIC_CHECKS for result in check.run(host)]
    except OutOfTime as late:
        checks = _out_of_time(late)
        host.static_stopped = str(late)
        host.runtime_blocked = f"the static check did not finish ({late})"
    checks += [result for check in RUNTIME_CHECKS for result in check.run(host)]
    facts = Facts(**{key: value for check in CHECKS for key, value in check.facts(host, checks).items()})
    return build_report(
        host=host.info(),
        request=host.request(),
        facts=facts,
        checks=checks,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", started),
        tool_version=TOOL_VERSION,
    )


def _out_of_time(late: OutOfTime) -> list[CheckResult]:
    reason = (
        f"the static check did not finish: {late} — a workstation's files take well under a second; look at "
        "what it stopped at (a hung mount, a flood of files)"
    )
    return [
        CheckResult(check_id, check_id, FAIL, reason, {"stopped_before": late.doing}) for check_id in STATIC_CHECK_IDS
    ]


def keep(report, directory: Path, metrics_dir: Path | None) -> None:
    """Keep the report in `directory` and refresh the metrics file; what fails is a warning line, never the run's."""
    try:
        replace_file(str(directory), VERIFY_REPORT, json.dumps(report.to_json(), indent=1) + "\n")
    except OSError as error:
        say(f"verify check: warning: could not keep the report in {directory} ({error.strerror or error})", error=True)
    problem = refresh_metrics(metrics_dir, directory)
    if problem is not None:
        say(f"verify check: warning: {problem}", error=True)


def refresh_metrics(metrics_dir: Path | None, kept_root: Path) -> str | None:
    """Rewrite metrics_dir/rocm_fleet.prom from the results kept under `kept_root` (nothing when `metrics_dir` is
    None); the one line saying why it could not, or None. `check --keep-in` and `boot-check` both end with it."""
    if metrics_dir is None:
        return None
    try:
        write_metrics(metrics_dir, kept_root)
    except (OSError, ValueError, TypeError) as error:  # a kept file of another verifier's making included
        return f"could not write {metrics_dir}/{FILE_NAME} ({getattr(error, 'strerror', None) or error})"
    return None
