"""Running the real verifier (`python -m verify check`) the way a host does, for tests of the checks and the reports.

    report, done = run_check(torch_cpu_venv(), "--device", "cpu")
    report, done = run_check(venv, standin="torch_reports_hip")      # the one mocked boundary, see standins/

The verifier runs as a subprocess of this test's python from the repository root, as the installed verifier's
launcher runs it on a host (tests/support/installed_verifier.py runs the installed form itself); its runtime probe then
runs with the venv's python. `standin` names a directory under
tests/support/standins/ put on PYTHONPATH (a sitecustomize that mocks what cannot exist here, or breaks something on
purpose); each says what it changes in its docstring.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.venvs import REPO, TORCH_CPU, ensure_venv

STANDINS = Path(__file__).resolve().parent / "standins"


def torch_cpu_venv() -> Path:
    """The real venv with torch 2.13.0 (CPU) and bitsandbytes 0.50.1 (built once, cached)."""
    return ensure_venv("torch-cpu", TORCH_CPU)


def run_check(
    venv: Path,
    *arguments: str,
    standin: str | None = None,
    env: dict[str, str] | None = None,
    expect_rocm: str = "7.2.4",
) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess]:
    """(the JSON report or None, the finished process) of `verify check --venv VENV --expect-rocm … --json ARGS`."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "BNB_ROCM_VERSION")}
    if standin:
        full_env["PYTHONPATH"] = str(STANDINS / standin)
    full_env.update(env or {})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "check",
            "--venv",
            str(venv),
            "--expect-rocm",
            expect_rocm,
            "--expect-bitsandbytes",
            "0.50.1",
            "--json",
            *arguments,
        ],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
    )
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
    return report, done


def run_check_root(root: Path, *arguments: str, venv: str = "/opt/rocm-fleet/venv") -> tuple[dict[str, Any], int]:
    """(report, exit code) of `verify check --root ROOT` on a filesystem image (static checks only)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "check",
            "--root",
            str(root),
            "--venv",
            venv,
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--json",
            *arguments,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.stdout.startswith("{"), done.stderr
    return json.loads(done.stdout), done.returncode


_CACHE: dict[tuple, tuple[dict[str, Any] | None, subprocess.CompletedProcess]] = {}


def cached_check(
    venv: Path, *arguments: str, standin: str | None = None
) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess]:
    """`run_check`, run once per test session for the same inputs (several test modules read the same real report)."""
    key = (str(venv), arguments, standin)
    if key not in _CACHE:
        _CACHE[key] = run_check(venv, *arguments, standin=standin)
    return _CACHE[key]


def check_by_id(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    found = [c for c in report["checks"] if c["id"] == check_id]
    assert found, f"no check {check_id} in the report; checks: {[c['id'] for c in report['checks']]}"
    return found[0]
