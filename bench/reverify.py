"""Benchmark (not a test): a fleet-wide re-verification, `pyinfra INVENTORY tasks/verify.py`, against peers timed in
the same run.

    sudo .venv/bin/python bench/reverify.py [--fleet NAME] [--rounds N]

On a local fleet whose hosts have their venv (`pyinfra INVENTORY tasks/venv.py`), times, round after round:
  (a) `pyinfra INVENTORY tasks/verify.py -y` — the re-verification: the verifier's install check, `verify check` on
      every host in parallel (static checks, versions, strays, the runtime probe and NF4 on the CPU), reports, summary;
  (b) `pyinfra INVENTORY exec -y -- true` — pyinfra's own cost: start, connect to every host, run one command;
  (c) the verifier's check on one host alone, timed inside it (the stage's own command: the installed verifier's
      `check … --device cpu` through its launcher) — the work
      each host does;
and prints best and median of each and the ratios (a)/(b), (a)/(c). Reports go to a scratch directory; every host of
the local fleet fails its check (no system ROCm there), which costs the same as passing.
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from roles.settings import check_data  # noqa: E402
from roles.verification.deploy import check_arguments  # noqa: E402
from roles.verifier import verifier_command  # noqa: E402

PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
ON_HOST = r"""
import subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(time.perf_counter() - start)
"""


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root", "PYINFRA_PROGRESS": "off"},
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default="default", help="localfleet fleet name (default: default)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from localfleet import Fleet
    from localfleet.inventory import GROUP

    fleet = Fleet.attach(args.fleet)
    inventory = str(fleet.inventory)
    first = fleet.hosts[0]
    # (c) runs the very command the verification stage sends, built from the fleet's own inventory data.
    _hosts, group_data = runpy.run_path(inventory)[GROUP]
    settings, problems = check_data(first.name, group_data)
    if settings is None:
        sys.exit(f"{inventory}: {problems[0].line()}")
    check = ["sh", "-c", verifier_command(*check_arguments(settings))]
    times: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    with tempfile.TemporaryDirectory(prefix="reverify-reports-") as reports:
        verify = [PYINFRA, inventory, "tasks/verify.py", "-y", "--data", f"reports_dir={reports}"]
        timed(verify)  # installs the verifier if this checkout changed it: not part of a re-verification's cost
        for _ in range(args.rounds):
            times["a"].append(timed(verify))
            times["b"].append(timed([PYINFRA, inventory, "exec", "-y", "--", "true"]))
            times["c"].append(float(first.run(["python3", "-c", ON_HOST, *check]).stdout))
        outcome = json.loads((Path(reports) / f"{first.name}.json").read_text())["reason"]

    best = {key: min(values) for key, values in times.items()}
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"fleet {args.fleet!r}: {len(fleet.hosts)} host(s); {first.name}'s verdict: {outcome[:120]}")
    print(f"best (median) of {args.rounds} rounds:")
    print(f"  (a) pyinfra INVENTORY tasks/verify.py  : {best['a']:6.2f} s ({median['a']:6.2f} s)")
    print(
        f"  (b) pyinfra INVENTORY exec -- true     : {best['b']:6.2f} s ({median['b']:6.2f} s)   (a) = "
        f"{best['a'] / best['b']:.1f} x (b)"
    )
    label = f"(c) verify check on {first.name} alone"
    print(f"  {label:37s} : {best['c']:6.2f} s ({median['c']:6.2f} s)   (a) = {best['a'] / best['c']:.1f} x (c)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
