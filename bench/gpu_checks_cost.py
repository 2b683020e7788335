"""Benchmark (not a test): what the GPU checks cost on the CPU — the runtime probe (NF4) with the model check —
against the same checks of another revision (default: main), measured in the same run, in interleaved rounds.

    .venv/bin/python bench/gpu_checks_cost.py [--base REV] [--rounds N] [--venv VENV]

Each side is run as the verifier runs it on a host with `--device cpu --model synthetic`: `VENV/bin/python -B -` fed
verify/checks/runtime_probe.py on stdin with runtime.probe_arguments("cpu"), then verify/checks/model_probe.py with
model.probe_arguments("cpu") — fresh processes, wall time from outside (interpreter start and imports included) and
the CPU time the processes used (user + system, from the kernel's accounting of children: on a shared machine the
steadier of the two), the caller's environment without OMP_NUM_THREADS (the model probe sets one thread itself). The
base revision's probe sources come from `git show REV:…` at run time. Rounds alternate which side goes first; the
ratios printed are new / base of the medians, and of the best times. The target (issue 24): at most 1.30.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verify.checks.model import probe_arguments as model_probe_arguments  # noqa: E402
from verify.checks.runtime import probe_arguments as runtime_probe_arguments  # noqa: E402

PROBES = ("verify/checks/runtime_probe.py", "verify/checks/model_probe.py")


def sources(revision: str | None) -> tuple[str, str]:
    if revision is None:
        return tuple((REPO / path).read_text() for path in PROBES)
    return tuple(
        subprocess.run(
            ["git", "show", f"{revision}:{path}"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
        for path in PROBES
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(python: Path, source: str, arguments: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, the probe's report) of one fresh probe process."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")}
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [str(python), "-B", "-", *arguments], input=source, capture_output=True, text=True, env=env, cwd="/"
    )
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.exit(f"the probe produced no report:\n{done.stderr[-3000:]}")
    return wall, _children_cpu() - cpu, json.loads(lines[-1])


def both(python: Path, pair: tuple[str, str]) -> dict[str, float]:
    runtime_source, model_source = pair
    runtime_wall, runtime_cpu, report = run_once(python, runtime_source, runtime_probe_arguments("cpu"))
    nf4_ok = all(not run.get("errors") for run in report.get("nf4") or [])
    model_wall, model_cpu, found = run_once(python, model_source, model_probe_arguments("cpu"))
    if not nf4_ok or found.get("errors") or any(d.get("errors") for d in found.get("devices") or []):
        sys.exit("a probe reported errors: the timing would not be of the checks")
    return {
        "runtime": runtime_wall,
        "model": model_wall,
        "total": runtime_wall + model_wall,
        "runtime CPU": runtime_cpu,
        "model CPU": model_cpu,
        "total CPU": runtime_cpu + model_cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--venv", type=Path, help="a venv with torch, bitsandbytes, transformers, accelerate")
    args = parser.parse_args()
    if args.venv is None:
        from tests.support.venvs import transformers_venv

        args.venv = transformers_venv()
    python = args.venv / "bin" / "python"
    sides = {"base": sources(args.base), "new": sources(None)}
    times: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    print(f"base: {args.base}; new: the working tree; {args.rounds} rounds, alternating which side goes first")
    print("| round | side | runtime probe s | model probe s | total s | total CPU s |")
    print("|---|---|---|---|---|---|")
    for number in range(args.rounds):
        order = ("base", "new") if number % 2 == 0 else ("new", "base")
        for side in order:
            measured = both(python, sides[side])
            times[side].append(measured)
            print(
                f"| {number + 1} | {side} | {measured['runtime']:.2f} | {measured['model']:.2f} | "
                f"{measured['total']:.2f} | {measured['total CPU']:.2f} |",
                flush=True,
            )
    for part in ("runtime", "model", "total", "runtime CPU", "model CPU", "total CPU"):
        base = [t[part] for t in times["base"]]
        new = [t[part] for t in times["new"]]
        print(
            f"{part}: base median {statistics.median(base):.2f} s, new median {statistics.median(new):.2f} s, "
            f"ratio {statistics.median(new) / statistics.median(base):.3f} (best: {min(new) / min(base):.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
