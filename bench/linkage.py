"""Benchmark (not a test): the linkage analyser against an `ldd` loop and a `libtree` loop, in one run.

    .venv/bin/python bench/linkage.py [--venv PATH] [--rounds N] [--python3 PATH]

Over every shared library of a large venv (default: torch 2.14.1 CUDA build with its nvidia-* wheels plus
bitsandbytes 0.50.1, built once by tests/support/venvs.py, 5.5 GB), measures
  (a) this analyser over all files in one fresh process of this venv's interpreter (start, imports, analysis and
      exit included),
  (d) the same with the deployed form: the verifier archive as the apt hook runs it — unpacked, byte-compiled and
      run by the host's python3 with -I (roles/verifier.py, roles/apt_hook),
  (b) `ldd FILE` for each file,
  (c) `libtree FILE` for each file,
and prints wall and CPU times (best and median of --rounds), the ratios against (a) and (d), in how many rounds the
analyser beat libtree, and the analyser's peak memory (the peak resident size of its process, VmHWM, which includes
the interpreter itself). Targets: (a) at least 5x faster than (b), no slower than (c), peak < 100 MB.

The rounds are interleaved, so machine load hits every contender alike; caches are warm after the first round for
all of them. The analyser's process runs as the verifier's own entry points run a command (verify/oneshot.py:
garbage collector off, frozen before exit), and what it does besides analysing is kept out of it: verify/ is
byte-compiled first (with PYTHONDONTWRITEBYTECODE set, stale .pyc files would otherwise be recompiled in every timed
run), and the child prints ldd's lines as plain text (importing json would be timed as if the analyser needed it). Also
checks the analyser's lines equal ldd's on every file, so the speed is not bought with wrong answers. Exit status 0 when
the lines match, the memory target is met and (a) meets its wall-time targets; CPU-time verdicts are printed for (a) and
(d) alike.
"""

from __future__ import annotations

import argparse
import compileall
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# argv: the directory verify/ is imported from, then the files. Prints "SECONDS PEAK_KIB", then for each file a
# "FILE path" line followed by its ldd lines (each starting with a tab) or one "ERROR message" line. The peak is the
# process's VmHWM: ru_maxrss survives exec, so a child forked from this (bigger) process would report our size.
CHILD = r"""
import sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from verify.oneshot import one_command_process
with one_command_process():  # as verify.cli.main and the apt hook run every command
    from verify.ld.elf import ElfError
    from verify.ld.lddview import ldd_lines
    from verify.ld.process import Analyser
    analyser = Analyser()
    out = []
    for path in sys.argv[2:]:
        out.append("FILE " + path)
        try:
            out.extend(ldd_lines(analyser.resolve(path)))
        except ElfError as error:
            out.append("ERROR " + str(error))
    elapsed = time.perf_counter() - start
    print(elapsed, next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
    print("\n".join(out))
"""

HEAP = r"""
import sys, tracemalloc
tracemalloc.start()
from verify.ld.lddview import ldd_lines
from verify.ld.process import Analyser
analyser = Analyser()
for path in sys.argv[1:]:
    try:
        ldd_lines(analyser.resolve(path))
    except Exception:
        pass
print(tracemalloc.get_traced_memory()[1])
"""

BASELINE = r"""
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
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


def parse_child_output(text: str) -> dict:
    """The child's report: {"seconds", "peak_kib", "results": {file: ldd lines, or the error message}}."""
    first, _, rest = text.partition("\n")
    rest = rest.rstrip("\n")
    seconds, peak_kib = first.split()
    results: dict[str, list[str] | str] = {}
    current = None
    for line in rest.splitlines():
        if line.startswith("FILE "):
            current = line[len("FILE ") :]
            results[current] = []
        elif line.startswith("ERROR "):
            results[current] = line[len("ERROR ") :]
        else:
            results[current].append(line)
    return {"seconds": float(seconds), "peak_kib": int(peak_kib), "results": results}


def run_analyser(python: list[str], import_dir: str, files: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, the child's report) of one analyser process."""
    cpu, start = _children_cpu(), time.perf_counter()
    result = subprocess.run(
        [*python, "-c", CHILD, import_dir, *files], capture_output=True, text=True, cwd=REPO, check=True
    )
    return time.perf_counter() - start, _children_cpu() - cpu, parse_child_output(result.stdout)


def run_each(tool: str, files: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the tool's processes and their children, outputs)."""
    outputs = {}
    cpu, start = _children_cpu(), time.perf_counter()
    for path in files:
        outputs[path] = subprocess.run([tool, path], capture_output=True, text=True)
    return time.perf_counter() - start, _children_cpu() - cpu, outputs


def host_python3() -> str | None:
    """The python3 a Debian/Ubuntu workstation runs the verifier with (here PATH may lead to another build)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else shutil.which("python3")


def deployed_copy(python3: str, into: Path) -> Path:
    """The verifier as the apt hook keeps it: the archive's files unpacked and byte-compiled by the host's python3."""
    # Built in another process: importing roles.verifier (pyinfra) here would grow this process, and a bigger
    # process forks more slowly, for every file of the ldd and libtree loops.
    archive_bytes = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from roles.verifier import zipapp_bytes; sys.stdout.buffer.write(zipapp_bytes())",
        ],
        capture_output=True,
        cwd=REPO,
        check=True,
    ).stdout
    copy = into / "verifier"
    with zipfile.ZipFile(io.BytesIO(archive_bytes)) as archive:
        archive.extractall(copy)
    subprocess.run([python3, "-I", "-m", "compileall", "-q", str(copy)], check=True, stdout=subprocess.DEVNULL)
    return copy


def _ms(values: list[float]) -> str:
    return f"{min(values) * 1000:6.0f} / {statistics.median(values) * 1000:6.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="analyse this venv instead of the torch-cuda one")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--python3", default=host_python3(), help="the host's python3 for the deployed form (default: /usr/bin/python3)"
    )
    args = parser.parse_args()
    if args.venv is None:
        from tests.support.venvs import TORCH_CUDA, ensure_venv

        args.venv = ensure_venv("torch-cuda", TORCH_CUDA)
    files = shared_libraries(args.venv)
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} shared libraries, {size / 2**30:.2f} GiB, under {args.venv}")

    from verify.api import parse_ldd_output

    compileall.compile_dir(str(REPO / "verify"), quiet=1)
    workdir = Path(tempfile.mkdtemp(prefix="bench-linkage-"))
    try:
        deployed = deployed_copy(args.python3, workdir) if args.python3 else None
        contenders = {"analyser": ([sys.executable], str(REPO))}
        if deployed:
            contenders["deployed"] = ([args.python3, "-I"], str(deployed))
        # Each contender's process with no file to analyse: interpreter start, imports, Analyser(), exit — what any
        # run pays before and after the analysis itself.
        floors = {f"{name} start": contender for name, contender in contenders.items()}
        wall: dict[str, list[float]] = {name: [] for name in [*contenders, *floors, "ldd", "libtree"]}
        cpu: dict[str, list[float]] = {name: [] for name in wall}
        reports: dict[str, dict] = {}
        ldd_outputs = None
        for _ in range(args.rounds):
            for name, (python, import_dir) in contenders.items():
                seconds, cpu_seconds, report = run_analyser(python, import_dir, files)
                if not wall[name] or seconds < min(wall[name]):
                    reports[name] = report
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
            for name, (python, import_dir) in floors.items():
                seconds, cpu_seconds, _ = run_analyser(python, import_dir, [])
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
            for tool in ("ldd", "libtree"):
                seconds, cpu_seconds, outputs = run_each(tool, files)
                wall[tool].append(seconds)
                cpu[tool].append(cpu_seconds)
                if tool == "ldd":
                    ldd_outputs = outputs
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    analysed = reports["analyser"]
    differences = [
        path
        for path in files
        if isinstance(analysed["results"][path], list)
        and analysed["results"][path] != parse_ldd_output(ldd_outputs[path].stdout)
    ]
    if "deployed" in reports and reports["deployed"]["results"] != analysed["results"]:
        differences.append("(the deployed form's lines differ from the venv's)")
    baseline_kib = int(subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True).stdout)
    peak_mib = analysed["peak_kib"] / 1024
    heap = int(
        subprocess.run(
            [sys.executable, "-c", HEAP, *files], capture_output=True, text=True, cwd=REPO, check=True
        ).stdout
    )

    labels = {
        "analyser": f"(a) analyser, one process ({Path(sys.executable).name} of this venv)",
        "analyser start": "    of which start, imports, exit (no files)",
        "deployed": f"(d) deployed form ({args.python3} -I, compiled copy)",
        "deployed start": "    of which start, imports, exit (no files)",
        "ldd": "(b) ldd on each file",
        "libtree": "(c) libtree on each file",
    }
    print(f"{args.rounds} rounds, interleaved; times in ms as best / median")
    print(f"{'':58} {'wall':>15}   {'CPU user+sys':>15}")
    for name in [*(n for c in contenders for n in (c, f"{c} start")), "ldd", "libtree"]:
        print(f"{labels[name]:58} {_ms(wall[name])}   {_ms(cpu[name])}")

    def ratio(peer: str, ours: str) -> str:
        return (
            f"{min(wall[peer]) / min(wall[ours]):5.2f} x wall, {min(cpu[peer]) / min(cpu[ours]):5.2f} x CPU "
            f"(best against best)"
        )

    for ours in contenders:
        print(f"{labels[ours][:3]}: ldd / {ours} = {ratio('ldd', ours)}   target >= 5 x")
        print(
            f"{labels[ours][:3]}: libtree / {ours} = {ratio('libtree', ours)}   target >= 1 x;   faster than libtree "
            f"in {sum(a <= b for a, b in zip(wall[ours], wall['libtree']))} of {args.rounds} rounds (wall), "
            f"{sum(a <= b for a, b in zip(cpu[ours], cpu['libtree']))} of {args.rounds} (CPU)"
        )
    print(
        f"analyser peak memory (VmHWM): {peak_mib:.1f} MiB (a bare interpreter: {baseline_kib / 1024:.1f} MiB)"
        f"   target < 100 MiB; Python heap peak (tracemalloc, imports included): {heap / 2**20:.1f} MiB"
    )
    print(
        f"analyser lines == ldd lines on {len(files) - len(differences)} of {len(files)} files"
        + (f"; differ: {differences[:5]}" if differences else "")
    )
    print(
        f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (the machine is shared: "
        "compare ratios, not absolute times)"
    )
    ok = not differences and peak_mib < 100
    for ours in contenders:
        met_wall = min(wall["ldd"]) >= 5 * min(wall[ours]) and min(wall["libtree"]) >= min(wall[ours])
        met_cpu = min(cpu["ldd"]) >= 5 * min(cpu[ours]) and min(cpu["libtree"]) >= min(cpu[ours])
        print(
            f"{labels[ours][:3]} {ours}: "
            + ("speed targets met" if met_wall else "SPEED TARGETS NOT MET")
            + " (wall); "
            + ("speed targets met" if met_cpu else "SPEED TARGETS NOT MET")
            + " (CPU time)"
        )
        if ours == "analyser":
            ok = ok and met_wall
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
