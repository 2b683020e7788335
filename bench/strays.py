"""Benchmark (not a test): what `verify strays` costs on a desktop-sized dpkg database, against peers in the same run.

    .venv/bin/python bench/strays.py [--packages 4000] [--rounds 7]

Builds a dpkg status file of --packages real package paragraphs (this machine's apt lists, `apt-cache dumpavail`,
marked installed; the Debian 12 distro ROCm packages and what pulls them in — slurm-wlm-rsmi-plugin, librocsparse0 —
always among them), then times, round after round so machine load hits all alike:
  (a) `python3 -m verify strays --root T --json` in a fresh process (interpreter start and imports included);
  (b) find_strays(T) inside one process (the detection alone);
  (c) `dpkg-query --admindir T/var/lib/dpkg -W` (dpkg's own C parser reading the same file) and
  (d) `python3 -I -c pass` (the interpreter's start alone), as peers.
Prints best and median, and the ratios against (c) and (d). Target (the apt hook runs it after every dpkg run): (a) well
under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verify.debian.strays import find_strays  # noqa: E402

ALWAYS = (
    "dpkg",
    "slurm-wlm-rsmi-plugin",
    "slurm-wlm-basic-plugins",
    "librocm-smi64-1",
    "librocsparse0",
    "libamdhip64-5",
    "libhsa-runtime64-1",
    "libhsakmt1",
    "libamd-comgr2",
    "rocminfo",
    "hipcc",
)


def build_status(count: int, root: Path) -> int:
    available = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    chosen, seen = [], set()
    paragraphs = [p for p in available.split("\n\n") if p.startswith("Package: ")]
    by_name = {p.split("\n", 1)[0][9:]: p for p in paragraphs}
    for name in ALWAYS:
        if name in by_name:
            chosen.append(by_name[name])
            seen.add(name)
    for paragraph in paragraphs:
        if len(chosen) >= count:
            break
        name = paragraph.split("\n", 1)[0][9:]
        if name not in seen:
            seen.add(name)
            chosen.append(paragraph)
    admin = root / "var/lib/dpkg"
    (admin / "info").mkdir(parents=True)
    (admin / "updates").mkdir()
    (admin / "available").touch()
    with open(admin / "status", "w") as status:
        for paragraph in chosen:
            head, rest = paragraph.split("\n", 1)
            status.write(f"{head}\nStatus: install ok installed\n{rest.strip()}\n\n")
    return len(chosen)


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-strays-") as top:
        root = Path(top)
        count = build_status(args.packages, root)
        size = (root / "var/lib/dpkg/status").stat().st_size
        report = find_strays(root)
        print(
            f"{count} installed packages, status file {size / 2**20:.1f} MiB; {len(report.strays)} strays: "
            + ", ".join(f"{s.package} (needed by {', '.join(s.needed_by) or 'nothing'})" for s in report.strays)
        )
        runs = {
            "(a) verify strays, fresh process": lambda: timed(
                [sys.executable, "-m", "verify", "strays", "--root", str(root), "--json"]
            ),
            "(b) find_strays in process": lambda: _in_process(root),
            "(c) dpkg-query -W (peer)": lambda: timed(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W"]),
            "(d) python3 -I -c pass (peer)": lambda: timed([sys.executable, "-I", "-c", "pass"]),
        }
        times = {label: [] for label in runs}
        for _ in range(args.rounds):
            for label, run in runs.items():
                times[label].append(run())
    best = {label: min(values) for label, values in times.items()}
    print(f"{'':36} {'best':>9} {'median':>9} {'/ (c)':>7} {'/ (d)':>7}")
    for label, values in times.items():
        print(
            f"{label:36} {best[label]:8.3f}s {statistics.median(values):8.3f}s "
            f"{best[label] / best['(c) dpkg-query -W (peer)']:7.1f} "
            f"{best[label] / best['(d) python3 -I -c pass (peer)']:7.1f}"
        )
    verdict = "met" if best["(a) verify strays, fresh process"] < 1.0 else "NOT met"
    print(f"target (a) < 1 s: {verdict}")
    return 0


def _in_process(root: Path) -> float:
    start = time.perf_counter()
    find_strays(root)
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
