"""Benchmark (not a test): the fleet status (`pyinfra INVENTORY tasks/status.py`) against pyinfra's own floor
(`pyinfra INVENTORY exec -- true`), and where its cost beyond the floor goes — many short rounds, interleaved, so
that a shared, noisy machine still gives a fair ratio.

    sudo .venv/bin/python bench/status_scale.py [--hosts 1,4,8] [--rounds 10] [--compare DIR] [--fleet NAME]

Each round runs, for each N, the floor and the status of this checkout (and of the checkout in --compare, e.g. the
code before a change: `git worktree add /tmp/before main`, or `git archive main | tar -x -C /tmp/before`) in an order
that rotates from round to round; every run is one pyinfra process of this venv, its CPU (user + system) from wait4.
Medians, and the median of the per-round ratios to the floor of the same round. Target (issue 12): status ≤ 1.2× the
floor at every N.

Where the time goes beyond the floor, measured apart:
- the controller's imports: CPU of importing what tasks/status.py imports, in a fresh interpreter that has already
  imported what the floor imports (pyinfra compiles the project's modules from source on every run: its CLI sets
  sys.dont_write_bytecode);
- the host's side: the status fact's command (roles/status/facts.py KeptResults: the installed verifier's `kept`,
  through its launcher) of each checkout inside ws1, against a bare `python3 -I -S -c pass` and `true` (what the
  floor runs).
  On this machine the hosts share the controller's cores, so at N hosts their programs add up; on a real fleet each
  host runs its own in parallel.

Fleet: by default one local fleet of max(--hosts) hosts is brought up, deployed as bench/fleet_scale.py does (the real
deploy on ws1, its venv copied into the others, the real deploy on all: each host then keeps a verification
report and an apt hook result, as a provisioned host does), and torn down at the end. `--fleet NAME` uses a running
fleet as it is instead (`python -m localfleet up --name NAME`, deployed by you; a host that keeps nothing costs less).
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
from bench.fleet_scale import replicate_venv, run_pyinfra  # noqa: E402

FLOOR = ["exec", "-y", "--", "true"]
STATUS = ["tasks/status.py", "-y"]
# What the floor's process has imported before it runs anything of ours (pyinfra's CLI and its exec operation).
FLOOR_IMPORTS = "import pyinfra.api, pyinfra_cli.cli, pyinfra.operations.server, pyinfra.operations.python"
STATUS_IMPORTS = "import roles.settings, roles.status.deploy"  # what tasks/status.py imports
IMPORT_PROBE = (
    f"{FLOOR_IMPORTS}\nimport time\nstarted = time.process_time()\n{STATUS_IMPORTS}\n"
    "print(time.process_time() - started)"
)
GET_COMMAND = "import sys\nfrom roles.status.facts import KeptResults\nsys.stdout.write(KeptResults().command())"


def run_in(checkout: Path, inventory: str, arguments: list[str]) -> tuple[float, float]:
    """(wall, CPU) of one pyinfra run from `checkout` (pyinfra puts its working directory on sys.path)."""
    env = dict(ENV)
    started = time.monotonic()
    process = subprocess.Popen(
        [PYINFRA, inventory, *arguments], cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(process.pid, 0)
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime


def import_cpu(checkout: Path, times: int) -> float:
    """Median CPU seconds of the status task's imports beyond the floor's, from `checkout`, bytecode not written."""
    found = []
    for _ in range(times):
        done = subprocess.run(
            [sys.executable, "-B", "-c", IMPORT_PROBE],
            cwd=checkout,
            capture_output=True,
            text=True,
            env={**ENV, "PYTHONDONTWRITEBYTECODE": "1"},
            check=True,
        )
        found.append(float(done.stdout))
    return statistics.median(found)


def host_side(host, programs: dict[str, str], times: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) medians of each status fact's command run inside `host` as root (and of `true`, `python3 -I -S`)."""
    commands = {"true": ["true"], "python3 -I -S -c pass": ["python3", "-I", "-S", "-c", "pass"]}
    commands.update({f"status fact ({label})": ["sh", "-c", command] for label, command in programs.items()})
    found = collections.defaultdict(list)
    for _ in range(times):
        for label, argv in commands.items():
            started = time.monotonic()
            process = subprocess.Popen(host.command(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(process.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"{label} failed inside {host.name}")
            found[label].append((time.monotonic() - started, usage.ru_utime + usage.ru_stime))
    return {
        label: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        for label, values in found.items()
    }


def set_up(fleet, scratch: Path, reports: Path, n: int) -> None:
    """As bench/fleet_scale.py: the real deploy on ws1, its venv into the others, the real deploy on all."""
    first = str(sub_inventory(fleet, 1, scratch, reports_dir=str(reports)))
    setup = run_pyinfra([first, "deploy.py", "-y"])
    print(
        f"  deploy on ws1 (venv from the wheelhouse): {setup.wall:.1f} s, exit {setup.code} "
        "(1 expected: no ROCm on local hosts)",
        flush=True,
    )
    replicate_venv(fleet)
    every = str(sub_inventory(fleet, n, scratch, reports_dir=str(reports)))
    setup = run_pyinfra([every, "deploy.py", "-y"])
    print(f"  deploy on all {n} hosts: {setup.wall:.1f} s, exit {setup.code}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,4,8", help="fleet sizes, comma-separated (default 1,4,8; ≤ 32)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--compare", type=Path, help="another checkout whose status is run alongside (e.g. main)")
    parser.add_argument("--fleet", help="use this running local fleet as it is (default: bring one up and deploy it)")
    parser.add_argument("--login", choices=("admin", "root"), default="admin")
    args = parser.parse_args()
    sizes = sorted({int(part) for part in args.hosts.split(",")})
    if os.geteuid() != 0:
        sys.exit(
            "run as root: a local fleet needs containers, mounts and sshd (sudo .venv/bin/python bench/status_scale.py)"
        )
    checkouts = {"status": REPO}
    if args.compare is not None:
        compare = args.compare.resolve()
        if not (compare / "tasks" / "status.py").is_file():
            sys.exit(f"--compare {compare}: no tasks/status.py there — give a checkout of this repository")
        checkouts["status (compare)"] = compare

    from localfleet import Fleet

    print(f"load average at start: {loads()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="status-scale-"))
    reports = scratch / "reports"
    fleet = None
    try:
        if args.fleet:
            fleet = Fleet.attach(args.fleet)
            if len(fleet.hosts) < max(sizes):
                sys.exit(f"fleet {args.fleet} has {len(fleet.hosts)} hosts, fewer than --hosts asks ({max(sizes)})")
        else:
            fleet = Fleet.up(n=max(sizes), login=args.login)
            print(f"fleet {fleet.name}: {max(sizes)} hosts, login {args.login}; setting up …", flush=True)
            set_up(fleet, scratch, reports, max(sizes))
        inventories = {n: str(sub_inventory(fleet, n, scratch, reports_dir=str(reports))) for n in sizes}

        programs = {
            label: subprocess.run(
                [sys.executable, "-c", GET_COMMAND], cwd=path, capture_output=True, text=True, check=True
            ).stdout
            for label, path in checkouts.items()
        }
        imports = {label: import_cpu(path, 5) for label, path in checkouts.items()}

        variants = [("floor", REPO, FLOOR)] + [(label, path, STATUS) for label, path in checkouts.items()]
        results = {n: collections.defaultdict(list) for n in sizes}
        for round_number in range(args.rounds):
            for n in sizes:
                shift = round_number % len(variants)
                order = variants[shift:] + variants[:shift]
                load_before = load()
                for label, path, arguments in order:
                    results[n][label].append(run_in(path, inventories[n], arguments))
                walls = "  ".join(f"{label} {results[n][label][-1][0]:.2f}" for label, _, _ in variants)
                print(f"  round {round_number + 1} N={n}: {walls} s; load {load_before} -> {load()}", flush=True)
        hosts = host_side(fleet.hosts[0], programs, max(5, args.rounds))
    finally:
        if fleet is not None and not args.fleet:
            fleet.down()
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"load average at the end: {loads()}")
    report(sizes, results, [label for label, _, _ in variants], imports, hosts, args)
    return 0


def report(sizes, results, labels, imports, hosts, args) -> None:
    print(
        f"\nmedian of {args.rounds} rounds, wall s / controller CPU s; ×floor: median of the per-round ratios "
        "(ratio of the medians in brackets)"
    )
    header = ["N"] + [f"{label}" for label in labels] + [f"{label} ×floor" for label in labels[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n in sizes:
        r = results[n]
        med = {
            label: (statistics.median(v[0] for v in r[label]), statistics.median(v[1] for v in r[label]))
            for label in labels
        }
        cells = [str(n)] + [f"{med[label][0]:.2f} / {med[label][1]:.2f}" for label in labels]
        for label in labels[1:]:
            per_round = statistics.median(s[0] / f[0] for s, f in zip(r[label], r["floor"]))
            cells.append(f"{per_round:.2f} ({med[label][0] / med['floor'][0]:.2f})")
        print("| " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        low, high = sizes[0], sizes[-1]
        print(f"\nper-host marginal cost, N={low}→{high} (wall s / CPU s per added host):")
        for label in labels:
            a, b = results[low][label], results[high][label]
            wall = (statistics.median(v[0] for v in b) - statistics.median(v[0] for v in a)) / (high - low)
            cpu = (statistics.median(v[1] for v in b) - statistics.median(v[1] for v in a)) / (high - low)
            print(f"  {label:18s} {wall:+.3f} / {cpu:+.3f}")
    print("\ncontroller: CPU of the status task's imports beyond the floor's (bytecode not written, as under pyinfra):")
    for label, seconds in imports.items():
        print(f"  {label:18s} {seconds * 1000:.0f} ms")
    print("\nhost side, inside ws1 (median wall ms / CPU ms, the entry into the host included):")
    for label, (wall, cpu) in hosts.items():
        print(f"  {label:34s} {wall * 1000:6.1f} / {cpu * 1000:6.1f}")


if __name__ == "__main__":
    sys.exit(main())
