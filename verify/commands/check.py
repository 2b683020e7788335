"""`python -m verify check --venv PATH --expect-rocm 7.2.4 [--device auto|cpu] [--json]` — every check, one report.

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
import re
import sys
from pathlib import Path

from verify.checks.probe_account import ProbeAccountError
from verify.checks.registry import CheckOptions, run_checks
from verify.commands import seconds, write_stdout
from verify.report.kept_files import VERIFY_REPORT, replace_file
from verify.report.metrics import FILE_NAME, write_metrics
from verify.stack.rocm_release import UnknownRelease, known_releases
from verify.stack.venv_layout import VenvError

_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}
MAX_TIMEOUT = 86400.0  # a day: an NF4 smoke test takes seconds
MODEL_CHOICES = ("off", "synthetic")  # … or the absolute path of a checkpoint directory


def model_source(text: str) -> str:
    """An argparse type: off, synthetic, or an absolute path (plain: no '..', '//', '.' parts, one line)."""
    if text in MODEL_CHOICES or (
        text.startswith("/") and "\n" not in text and os.path.normpath(text) == text.rstrip("/")
    ):
        return text.rstrip("/") or text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not off, synthetic or the absolute path of a checkpoint directory "
        "on this host (e.g. /srv/models/llama-13b)"
    )


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
    """The question `check` answers — shared by `boot-check`, which asks it once per boot."""
    parser.add_argument("--venv", required=True, type=Path, help="the venv with torch and bitsandbytes")
    parser.add_argument("--expect-rocm", required=True, metavar="X.Y.Z", help="the ROCm release the host must have")
    parser.add_argument("--expect-bitsandbytes", default="0.50.1", metavar="VERSION")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu"),
        default="auto",
        help="auto: NF4 on every visible GPU (none visible fails, unless --no-gpu-required); "
        "cpu: NF4 on the CPU only — for test fleets and CI, and the report says it is not a GPU pass",
    )
    parser.add_argument(
        "--no-gpu-required",
        dest="gpu_required",
        action="store_false",
        help="a host without a GPU is not a failure (NF4 then runs on the CPU)",
    )
    parser.add_argument(
        "--static-only",
        action="store_true",
        help="linkage, versions and strays only: no torch import, no GPU (what the apt hook runs)",
    )
    parser.add_argument(
        "--root", type=Path, default=Path("/"), help="analyse the filesystem image at DIR (implies --static-only)"
    )
    parser.add_argument(
        "--timeout",
        type=seconds(MAX_TIMEOUT),
        default=900.0,
        help=f"seconds the runtime probe may take (at most {MAX_TIMEOUT:g})",
    )
    parser.add_argument(
        "--model",
        type=model_source,
        default="off",
        metavar="off|synthetic|PATH",
        help="after NF4, on each device it passed on: a 4-bit NF4 causal LM through Transformers — "
        "synthetic: a small seeded Llama built here; PATH: a checkpoint directory on this host "
        "(safetensors); off (the default; the verification stage passes verify_model). Run as the "
        "probe's account, never as root",
    )
    parser.add_argument(
        "--model-timeout",
        type=seconds(MAX_TIMEOUT),
        default=600.0,
        help=f"seconds the model check may take (at most {MAX_TIMEOUT:g})",
    )
    parser.add_argument(
        "--probe-user",
        metavar="USER",
        help="run the runtime probe (the venv's python) as this account — the venv's owner; default: "
        "the owner of the venv's directory when run as root, else yourself. Root runs it only in a "
        "venv nothing of which another account owns or can write",
    )
    parser.add_argument(
        "--torch-label",
        metavar="TEXT",
        help="shown with torch's version in the report, e.g. 'torch 2.13.0 CPU, stand-in for the ROCm wheel'",
    )
    parser.add_argument(
        "--expect-amd-repo",
        action="store_true",
        help="ROCm comes from AMD's apt repositories on this host: check AMD's pin (present and "
        "effective for the names the distributions share) and AMD's lists (apt.pin, apt.lists)",
    )
    parser.add_argument(
        "--metrics-dir",
        type=Path,
        metavar="DIR",
        help="rewrite node_exporter's DIR/rocm_fleet.prom from the results this host keeps under "
        "/var/lib/rocm-fleet (check: in --keep-in's DIR), when DIR exists",
    )


def options_from(args: argparse.Namespace, command: str = "verify check") -> CheckOptions | str:
    """The CheckOptions of these arguments, or the one line that says why they are bad usage."""
    if not _RELEASE.match(args.expect_rocm):
        return f"{command}: --expect-rocm {args.expect_rocm!r} is not a release like 7.2.4"
    if args.expect_rocm not in known_releases():
        return f"{command}: --expect-rocm: {UnknownRelease.of(args.expect_rocm)}"
    if not args.venv.is_absolute():
        return f"{command}: --venv {args.venv} must be an absolute path"
    if not args.root.is_dir():
        return f"{command}: --root {args.root} is not a directory"
    root = args.root.resolve()
    static_only = args.static_only or root != Path("/")
    if args.model not in MODEL_CHOICES and not static_only and not os.path.isdir(args.model):
        return f"{command}: --model {args.model}: no such directory on this host — give a checkpoint directory"
    return CheckOptions(
        venv=args.venv,
        expect_rocm=args.expect_rocm,
        expect_bitsandbytes=args.expect_bitsandbytes,
        device=args.device,
        gpu_required=args.gpu_required,
        static_only=static_only,
        root=root,
        timeout=args.timeout,
        torch_label=args.torch_label,
        expect_amd_repo=args.expect_amd_repo,
        probe_user=args.probe_user,
        model=args.model,
        model_timeout=args.model_timeout,
    )


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    if isinstance(options, str):
        print(options, file=sys.stderr)
        return 2
    if args.metrics_dir is not None and args.keep_in is None:
        print(
            "verify check: --metrics-dir needs --keep-in (the metrics are made from the results kept there)",
            file=sys.stderr,
        )
        return 2
    try:
        report = run_checks(options)
    except (VenvError, ProbeAccountError) as error:
        print(f"verify check: {error}", file=sys.stderr)
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
        print(
            f"verify check: warning: could not keep the report in {directory} ({error.strerror or error})",
            file=sys.stderr,
        )
    problem = refresh_metrics(metrics_dir, directory)
    if problem is not None:
        print(f"verify check: warning: {problem}", file=sys.stderr)


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
