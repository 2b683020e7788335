"""Benchmark (not a test): a no-op re-deploy from this checkout against the same from another checkout, beside
pyinfra's own floor, in interleaved rounds — what one change to the controller's code costs or saves a user.

    sudo .venv/bin/python bench/noop_deploy.py --fleet NAME --compare DIR [--hosts 1,4] [--rounds 5]

The fleet (`python -m localfleet up --name NAME`) must already be deployed from this checkout (so both runs change
nothing), and DIR must hold the same verifier (verify/) or each run would install its own. Each round runs, for each N,
`pyinfra INVENTORY exec -- true` (the floor) and `pyinfra INVENTORY deploy.py -y` from each checkout, in an order that
rotates from round to round; every run is one pyinfra process of this venv, its CPU (user + system) from wait4, its
working directory the checkout (pyinfra puts it on sys.path). Every local host fails verification (no ROCm): that costs
the same as passing. Medians, and the median of the per-round ratios to the floor of the same round.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.fleet_runs import ENV, PYINFRA, load, loads, sub_inventory  # noqa: E402

FLOOR = ["exec", "-y", "--", "true"]
DEPLOY = ["deploy.py", "-y"]


def run_in(checkout: Path, inventory: str, arguments: list[str]) -> tuple[float, float]:
    """(wall, controller CPU) of one pyinfra run from `checkout`."""
    started = time.monotonic()
    process = subprocess.Popen(
        [PYINFRA, inventory, *arguments], cwd=checkout, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(process.pid, 0)
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", required=True, help="a running local fleet, deployed from this checkout")
    parser.add_argument("--compare", type=Path, required=True, help="the other checkout")
    parser.add_argument("--hosts", default="1,4", help="fleet sizes, comma-separated (default 1,4)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: a local fleet needs containers and sshd (sudo .venv/bin/python bench/noop_deploy.py)")
    sizes = sorted({int(part) for part in args.hosts.split(",")})
    compare = args.compare.resolve()
    if not (compare / "deploy.py").is_file():
        sys.exit(f"--compare {compare}: no deploy.py there — give a checkout of this repository")

    from localfleet import Fleet

    fleet = Fleet.attach(args.fleet)
    if len(fleet.hosts) < max(sizes):
        sys.exit(f"fleet {args.fleet} has {len(fleet.hosts)} hosts, fewer than --hosts asks ({max(sizes)})")
    print(f"load average at start: {loads()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="noop-deploy-"))
    try:
        reports = str(scratch / "reports")
        inventories = {n: str(sub_inventory(fleet, n, scratch, reports_dir=reports)) for n in sizes}
        variants = [("floor", REPO, FLOOR), ("this checkout", REPO, DEPLOY), ("compare", compare, DEPLOY)]
        for n in sizes:  # once, untimed: both checkouts find the hosts as they leave them
            for _, checkout, arguments in variants[1:]:
                run_in(checkout, inventories[n], arguments)
        results = {n: collections.defaultdict(list) for n in sizes}
        for round_number in range(args.rounds):
            for n in sizes:
                shift = round_number % len(variants)
                before = load()
                for label, checkout, arguments in variants[shift:] + variants[:shift]:
                    results[n][label].append(run_in(checkout, inventories[n], arguments))
                walls = "  ".join(f"{label} {results[n][label][-1][0]:.2f}" for label, _, _ in variants)
                print(f"  round {round_number + 1} N={n}: {walls} s; load {before} -> {load()}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average at the end: {loads()}")
    print(f"\nmedian of {args.rounds} rounds: wall s / controller CPU s; ×floor: median of the per-round wall ratios")
    print("| N | floor | this checkout | compare | this ×floor | compare ×floor | this ÷ compare (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        r = results[n]
        med = {label: tuple(statistics.median(v[i] for v in r[label]) for i in (0, 1)) for label in r}
        ratio = {
            label: statistics.median(a[0] / f[0] for a, f in zip(r[label], r["floor"], strict=True))
            for label in ("this checkout", "compare")
        }
        cells = [f"{med[label][0]:.2f} / {med[label][1]:.2f}" for label in ("floor", "this checkout", "compare")]
        cpu = med["this checkout"][1] / med["compare"][1]
        print(f"| {n} | {' | '.join(cells)} | {ratio['this checkout']:.2f} | {ratio['compare']:.2f} | {cpu:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
