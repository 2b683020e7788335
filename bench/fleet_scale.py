"""Benchmark (not a test): how the cost of a run grows with the fleet — wall time and controller CPU of
  (a) a no-op re-deploy (`pyinfra INVENTORY deploy.py`), split into its provisioning stages and the verification,
  (b) a re-verification (`pyinfra INVENTORY tasks/verify.py`),
  (c) the fleet status (`pyinfra INVENTORY tasks/status.py`),
each against pyinfra's own floor, `pyinfra INVENTORY exec -- true`, measured in the same round, interleaved; and the
provisioning also against a second peer, "questions alone" (bench/ask_only.py): pyinfra asking every host the no-op
deploy's read-ahead commands (recorded once, after setup) and running `true`, nothing else — the floor plus the
hosts' own work of answering. Provisioning ÷ floor is the target; provisioning ÷ questions is what rocm-fleet adds
on the controller (and its second command, the wheelhouse's hashes): on this machine the hosts' answers share the
controller's cores, on a real fleet each host answers on its own. Likewise status against "status's question
alone": bench/ask_only.py asking every host the status task's one command (roles/status/facts.KeptResults).

    sudo .venv/bin/python bench/fleet_scale.py [--hosts 1,4,8,16] [--rounds 3] [--login admin|root] [--profile]

One local fleet of max(--hosts) Debian 12 workstations (localfleet) is brought up and torn down at the end (also on
failure or Ctrl-C); each N runs against an inventory of its first N hosts. Setup: the real deploy on ws1 (venv from the
offline wheelhouse), then — to spare this machine 15 torch installs — its venv and wheelhouse copy are copied into
the other hosts (reflinks where the filesystem has them; hard links cannot cross the hosts' overlay mounts), and the
real deploy runs on all of them (verifier, apt hook; their venv stage then
finds the venv in place: a no-op, as on a provisioned fleet). Every local host fails verification (no ROCm here):
that costs the same as passing.

Each run is one `pyinfra` process; its CPU (user + system) comes from wait4. `bench/run_probe.py` rides along in (a)
to time the first operation of every stage and to count the commands (SSH round trips) and file transfers of every
host per stage. The verification's yardstick is the host's own work: the runtime probe (`import torch, bitsandbytes`
and NF4, `verify/checks/runtime_probe.py` with the verifier's arguments, exactly what it runs in the venv) timed
inside ws1 alone, and inside all N hosts at once (on this machine N hosts share its cores; on a real fleet each has
its own).

Targets: provisioning ≤ 1.5 × floor at every N and ≤ 1 s controller CPU per host; verification ≤ the host's
own import + NF4 + 1 s; status ≤ 1.2 × floor. Absolute numbers move with the machine's load: read the ratios.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.fleet_runs import ENV, PYINFRA, load, loads, sub_inventory  # noqa: E402
from roles.status.facts import KeptResults  # noqa: E402
from verify.checks.runtime import probe_arguments as runtime_probe_arguments  # noqa: E402
from verify.checks.runtime import probe_source as runtime_probe_source  # noqa: E402

VENV = "/opt/rocm-fleet/venv"
HOST_WHEELHOUSE = "/var/cache/rocm-fleet/wheelhouse"
# The verifier's own arguments for the probe (verify/checks/runtime.run_probe), on the CPU as on every local host.
PROBE_ARGUMENTS = runtime_probe_arguments("cpu")
# Inside a host: time the runtime probe (what the verifier runs in the venv) and nothing else.
TIME_PROBE = (
    "import subprocess, sys, time\n"
    "source = open(sys.argv[1], 'rb').read()\n"
    "start = time.perf_counter()\n"
    "subprocess.run([sys.argv[2], '-B', '-', *sys.argv[3:]], input=source, stdout=subprocess.DEVNULL,\n"
    "               stderr=subprocess.DEVNULL, check=True)\n"
    "print(time.perf_counter() - start)\n"
)


@dataclass
class Run:
    wall: float
    cpu: float
    started: float  # CLOCK_MONOTONIC
    code: int
    probe: dict | None = None


def run_pyinfra(argv: list[str], probe_path: Path | None = None, **extra_env: str) -> Run:
    env = {**ENV, **extra_env}
    if probe_path is not None:
        env["ROCM_FLEET_PROBE"] = str(probe_path)
        probe_path.unlink(missing_ok=True)
    started = time.monotonic()
    process = subprocess.Popen(
        [PYINFRA, *argv], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    probe = json.loads(probe_path.read_text()) if probe_path is not None and probe_path.is_file() else None
    return Run(wall, usage.ru_utime + usage.ru_stime, started, process.returncode, probe)


def replicate_venv(fleet) -> None:
    """ws1's venv and wheelhouse copy, copied into every other host (each host root is its own overlay mount, so
    hard links across hosts are refused: EXDEV)."""
    first = fleet.hosts[0]
    for other in fleet.hosts[1:]:
        for path in (VENV, HOST_WHEELHOUSE):
            source, dest = first.root / path.lstrip("/"), other.root / path.lstrip("/")
            if dest.exists():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(dest)], check=True)


def read_ahead_commands(inventory: str, probe_path: Path) -> list[str]:
    """The commands of ws1's read-ahead in a no-op re-deploy (bench/run_probe.py records them): what
    bench/ask_only.py asks every host, as the peer "questions alone". Local hosts share one configuration, so ws1's
    commands are every host's."""
    run = run_pyinfra([inventory, "bench/run_probe.py", "deploy.py", "-y"], probe_path)
    commands = (run.probe or {}).get("batches", {}).get("ws1")
    if not commands:
        sys.exit("the no-op re-deploy read nothing ahead on ws1: no commands for the peer 'questions alone'")
    return commands


def host_own(hosts) -> float:
    """Wall time of the runtime probe (import torch, bitsandbytes + NF4 on the CPU) run inside every host at once."""
    source = "/tmp/rocm-fleet-bench-probe.py"
    for host in hosts:
        (host.root / source.lstrip("/")).write_text(runtime_probe_source())
    started = time.monotonic()
    command = ["python3", "-c", TIME_PROBE, source, f"{VENV}/bin/python", *PROBE_ARGUMENTS]
    processes = [subprocess.Popen(host.command(command), stdout=subprocess.PIPE, text=True) for host in hosts]
    for process in processes:
        process.communicate()
        if process.returncode != 0:
            sys.exit(f"the runtime probe failed in a host (exit {process.returncode})")
    return time.monotonic() - started


def stages_of(run: Run) -> dict[str, tuple[float, float]]:
    """(wall, CPU) of the provisioning stages and of the verification, from the probe's first 'Verify' operation."""
    probe = run.probe
    verify = (probe or {}).get("stage_start", {}).get("Verify")
    if verify is None:
        return {"provisioning": (run.wall, run.cpu), "verification": (0.0, 0.0)}
    at, cpu_at = verify
    # The probe's CPU is getrusage(SELF) inside pyinfra; wait4's total adds only the exit after the last callback.
    return {
        "provisioning": (at - run.started, cpu_at),
        "verification": (run.wall - (at - run.started), run.cpu - cpu_at),
    }


def round_trips(probe: dict, host: str) -> dict[str, collections.Counter]:
    """(stage -> Counter of 'phase kind what', 'stage\tphase kind what' -> seconds waited) for one host."""
    found: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    waited: dict[str, float] = collections.defaultdict(float)
    for call in probe["calls"]:
        if call["host"] == host:
            what = f"{call['phase']:7} {call['kind']:7} {call['what']}"
            found[call["stage"]][what] += call["count"]
            waited[f"{call['stage']}\t{what}"] += call["seconds"]
    return found, waited


def median(values):
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,4,8,16", help="fleet sizes, comma-separated (default 1,4,8,16; ≤ 32)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--login", choices=("admin", "root"), default="admin", help="admin (sudo, as real fleets; default) or root"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the largest fleet's no-op re-deploy once under cProfile and print the top",
    )
    args = parser.parse_args()
    sizes = sorted({int(part) for part in args.hosts.split(",")})
    if os.geteuid() != 0:
        sys.exit(
            "run as root: a local fleet needs containers, mounts and sshd (sudo .venv/bin/python bench/fleet_scale.py)"
        )

    from localfleet import Fleet

    print(f"load average at start: {loads()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    reports = scratch / "reports"
    probe_path = scratch / "probe.json"
    try:
        with Fleet.up(n=max(sizes), login=args.login) as fleet:
            inventories = {n: str(sub_inventory(fleet, n, scratch, reports_dir=str(reports))) for n in sizes}
            print(f"fleet {fleet.name}: {max(sizes)} hosts, login {args.login}; setting up …", flush=True)
            first = str(sub_inventory(fleet, 1, scratch, reports_dir=str(reports)))
            setup = run_pyinfra([first, "deploy.py", "-y"])
            print(
                f"  deploy on ws1 (venv from the wheelhouse): {setup.wall:.1f} s, exit {setup.code} "
                "(1 expected: no ROCm on local hosts)",
                flush=True,
            )
            replicate_venv(fleet)
            setup = run_pyinfra([inventories[max(sizes)], "deploy.py", "-y"])
            print(f"  deploy on all {max(sizes)} hosts: {setup.wall:.1f} s, exit {setup.code}", flush=True)
            asks = scratch / "asks.json"
            asks.write_text(json.dumps(read_ahead_commands(inventories[max(sizes)], probe_path)))
            status_ask = scratch / "status_ask.json"
            status_ask.write_text(json.dumps([KeptResults().command()]))

            results: dict[int, dict[str, list]] = {n: collections.defaultdict(list) for n in sizes}
            probes: dict[int, dict] = {}
            for round_number in range(1, args.rounds + 1):
                for n in sizes:
                    inventory = inventories[n]
                    r = results[n]
                    load_before = load()
                    floor = run_pyinfra([inventory, "exec", "-y", "--", "true"])
                    r["floor"].append((floor.wall, floor.cpu))
                    asked = run_pyinfra([inventory, "bench/ask_only.py", "-y"], ROCM_FLEET_ASK=str(asks))
                    r["questions"].append((asked.wall, asked.cpu))
                    deploy = run_pyinfra([inventory, "bench/run_probe.py", "deploy.py", "-y"], probe_path)
                    parts = stages_of(deploy)
                    r["deploy"].append((deploy.wall, deploy.cpu))
                    r["provisioning"].append(parts["provisioning"])
                    r["verification"].append(parts["verification"])
                    probes[n] = deploy.probe or {}
                    verify = run_pyinfra([inventory, "tasks/verify.py", "-y"])
                    r["verify"].append((verify.wall, verify.cpu))
                    status = run_pyinfra([inventory, "tasks/status.py", "-y"])
                    r["status"].append((status.wall, status.cpu))
                    status_asked = run_pyinfra([inventory, "bench/ask_only.py", "-y"], ROCM_FLEET_ASK=str(status_ask))
                    r["status question"].append((status_asked.wall, status_asked.cpu))
                    r["own1"].append((host_own(fleet.hosts[:1]), 0.0))
                    r["ownN"].append((host_own(fleet.hosts[:n]), 0.0))
                    print(
                        f"  round {round_number} N={n}: floor {floor.wall:.2f} s, questions alone "
                        f"{asked.wall:.2f} s, deploy {deploy.wall:.2f} s "
                        f"(provisioning {parts['provisioning'][0]:.2f} s), verify {verify.wall:.2f} s; "
                        f"load {load_before} -> {load()}",
                        flush=True,
                    )

            if args.profile:
                n = max(sizes)
                out = scratch / "deploy.prof"
                done = subprocess.run(
                    [sys.executable, "-m", "cProfile", "-o", str(out), PYINFRA, inventories[n], "deploy.py", "-y"],
                    cwd=REPO,
                    env=ENV,
                    capture_output=True,
                )
                print(f"\ncProfile of the no-op re-deploy, N={n} (exit {done.returncode}), top 25 by own time:")
                pstats.Stats(str(out)).sort_stats("tottime").print_stats(25)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"load average at the end: {loads()}")
    report(sizes, results, probes, args)
    return 0


def report(sizes, results, probes, args) -> None:
    print(f"\nmedian of {args.rounds} rounds (wall s / controller CPU s); ratios against the floor of the same N")
    header = (
        "N",
        "floor",
        "questions alone",
        "provisioning",
        "×floor",
        "×questions",
        "CPU/host",
        "verification",
        "host own 1",
        "host own N",
        "tasks/verify.py",
        "×floor",
        "status",
        "×floor",
        "status's question alone",
        "×question",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n in sizes:
        r = results[n]
        m = {key: (median([v[0] for v in values]), median([v[1] for v in values])) for key, values in r.items()}
        floor = m["floor"]
        status = (
            f"{m['status'][0]:.2f} / {m['status'][1]:.2f} | {m['status'][0] / floor[0]:.2f} | "
            f"{m['status question'][0]:.2f} | {m['status'][0] / m['status question'][0]:.2f}"
        )
        asked = m["questions"]
        print(
            f"| {n} | {floor[0]:.2f} / {floor[1]:.2f} | {asked[0]:.2f} / {asked[1]:.2f} | "
            f"{m['provisioning'][0]:.2f} / {m['provisioning'][1]:.2f} | "
            f"{m['provisioning'][0] / floor[0]:.2f} | {m['provisioning'][0] / asked[0]:.2f} | "
            f"{m['provisioning'][1] / n:.2f} | "
            f"{m['verification'][0]:.2f} / {m['verification'][1]:.2f} | {m['own1'][0]:.2f} | {m['ownN'][0]:.2f} | "
            f"{m['verify'][0]:.2f} / {m['verify'][1]:.2f} | {m['verify'][0] / floor[0]:.2f} | {status} |"
        )
    if len(sizes) > 1:
        low, high = sizes[0], sizes[-1]

        def slope(key, index):
            a = median([v[index] for v in results[low][key]])
            b = median([v[index] for v in results[high][key]])
            return (b - a) / (high - low)

        print(f"\nper-host marginal cost, N={low}→{high} (wall s / CPU s per added host):")
        for key in ("floor", "questions", "provisioning", "verification", "verify", "status", "status question"):
            print(f"  {key:13s} {slope(key, 0):+.3f} / {slope(key, 1):+.3f}")
    n = sizes[-1]
    probe = probes.get(n)
    if probe:
        print(
            f"\nSSH round trips of ws1 in the no-op re-deploy (N={n}), per stage "
            "(plan: while the deploy files load; execute: while operations run):"
        )
        counters, waited = round_trips(probe, "ws1")
        for stage, counter in counters.items():
            seconds = {what: waited[stage + "\t" + what] for what in counter}
            print(f"  {stage}: {sum(counter.values())} ({sum(seconds.values()):.2f} s waited)")
            for what, count in counter.most_common():
                print(f"      {count:3d}  {seconds[what]:6.2f} s  {what}")


if __name__ == "__main__":
    sys.exit(main())
