"""Benchmark (not a test): where a host's CPU goes when it answers a no-op re-deploy's questions (the read-ahead,
roles/run_reads.py), fact by fact.

    sudo .venv/bin/python bench/read_ahead_parts.py [--rounds 15] [--login admin|root]

One local Debian 12 host (localfleet) is brought up, deployed (venv from the offline wheelhouse) and deployed again
with bench/run_probe.py, which records the read-ahead's commands as the host's shell got them and each fact's own
command in them; every fact's command runs inside the host (`sh -c`, as root, as the
read-ahead does), in a new random order in every round, timed by a python3 inside the host with wait4: CPU (user +
system of the part's shell and everything it waited for) and wall. The whole read-ahead, as one shell, runs in the
same rounds. Medians; each part is named by the start of its command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.fleet_runs import loads, sub_inventory  # noqa: E402
from bench.fleet_scale import read_ahead_commands, run_pyinfra  # noqa: E402

# Inside the host: run each part (argv[1], a JSON list of shell commands) in a random order and print, per part,
# [CPU seconds, wall seconds].
TIME_PARTS = (
    "import json, os, random, subprocess, sys, time\n"
    "parts = json.loads(sys.argv[1])\n"
    "order = list(range(len(parts)))\n"
    "random.shuffle(order)\n"
    "times = [None] * len(parts)\n"
    "for index in order:\n"
    "    started = time.perf_counter()\n"
    "    process = subprocess.Popen(['/bin/sh', '-c', parts[index]], stdout=subprocess.DEVNULL,\n"
    "                               stderr=subprocess.DEVNULL)\n"
    "    _, status, usage = os.wait4(process.pid, 0)\n"
    "    times[index] = [usage.ru_utime + usage.ru_stime, time.perf_counter() - started]\n"
    "print(json.dumps(times))\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--login", choices=("admin", "root"), default="admin")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit(
            "run as root: a local fleet needs containers, mounts and sshd (sudo .venv/bin/python "
            "bench/read_ahead_parts.py)"
        )

    from localfleet import Fleet

    print(f"load average at start: {loads()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="read-ahead-parts-") as scratch, Fleet.up(n=1, login=args.login) as fleet:
        inventory = str(sub_inventory(fleet, 1, Path(scratch), reports_dir=str(Path(scratch) / "reports")))
        setup = run_pyinfra([inventory, "deploy.py", "-y"])
        print(
            f"deploy on ws1 (venv from the wheelhouse): {setup.wall:.1f} s, exit {setup.code} "
            "(1 expected: no ROCm on local hosts)",
            flush=True,
        )
        probe_path = Path(scratch) / "probe.json"
        commands = read_ahead_commands(inventory, probe_path)
        parts = json.loads(probe_path.read_text())["batch_parts"]["ws1"] + ["\n".join(commands)]
        host = fleet.hosts[0]
        times: list[list[tuple[float, float]]] = [[] for _ in parts]
        for _ in range(args.rounds):
            done = host.run(["python3", "-I", "-S", "-c", TIME_PARTS, json.dumps(parts)])
            for index, (cpu, wall) in enumerate(json.loads(done.stdout)):
                times[index].append((cpu, wall))
    print(f"load average at the end: {loads()}")

    print(f"\n{len(commands)} read-ahead commands, {len(parts) - 1} facts; median of {args.rounds} rounds inside ws1")
    print("| part | CPU ms | wall ms | command |")
    print("|---|---|---|---|")
    total = 0.0
    for index, part in enumerate(parts):
        cpu = statistics.median(t[0] for t in times[index]) * 1000
        wall = statistics.median(t[1] for t in times[index]) * 1000
        last = index == len(parts) - 1
        total += 0.0 if last else cpu
        label = "all of it, as the read-ahead runs it" if last else " ".join(part.split())[:90]
        print(f"| {'all' if last else index} | {cpu:.0f} | {wall:.0f} | {label} |")
    print(f"sum of the parts' CPU: {total:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
