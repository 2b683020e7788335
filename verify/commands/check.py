"""`python -m verify check --venv PATH --expect-rocm 7.2.4 --expect-bitsandbytes 0.50.1 [--json]` — every check, one
report. What it is asked (verify/question.py) is what the inventory asks of a host: the verification stage passes it.

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
from pathlib import Path

from verify.checks.probe_account import ProbeAccountError
from verify.checks.registry import CheckOptions, run_checks
from verify.commands import say, seconds, write_stdout
from verify.question import MODELS, Question, QuestionError
from verify.report.kept_files import VERIFY_REPORT, replace_file
from verify.report.metrics import FILE_NAME, write_metrics
from verify.stack.rocm_release import UnknownRelease, known_releases
from verify.stack.venv_layout import VenvError

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
