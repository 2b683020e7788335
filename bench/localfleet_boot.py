"""Benchmark (not a test): what booting a local test workstation costs, against a chroot host measured in the same run.

    sudo .venv/bin/python bench/localfleet_boot.py [--hosts N] [--rounds R]

Round after round, for chroot hosts (`Fleet.up(n, boot=False)`) and booted ones (`Fleet.up(n)`), alternating:
  - up: from the call until every host answers over SSH (the base root already cached);
  - a first command over SSH (`ssh HOST true`): a chroot's sshd, or ssh.service under systemd;
  - memory: the proportional set size (PSS) of every process of the hosts, summed — a chroot host's sshd, or all of
    a booted host's cgroup (its launcher, nspawn, systemd, journald, logind, dbus, sshd) — per host, once idle;
  - reboot (booted only): `host.reboot()`, until its boot has finished and sshd answers again;
  - down: until nothing of the fleet is left.
Prints best and median of each, and booted/chroot ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localfleet import Fleet  # noqa: E402
from localfleet.cgroups import memory_kib  # noqa: E402
from localfleet.procs import processes_rooted_under  # noqa: E402


def pss_kib(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def one_round(n: int, boot: bool) -> dict[str, float]:
    found: dict[str, float] = {}
    started = time.perf_counter()
    fleet = Fleet.up(n=n, boot=boot)
    try:
        found["up"] = time.perf_counter() - started
        host = fleet.hosts[0]
        started = time.perf_counter()
        host.ssh(["true"])
        found["first ssh"] = time.perf_counter() - started
        if boot:
            found["memory MiB/host"] = sum(memory_kib(fleet.host_cgroup(h.name)) for h in fleet.hosts) / n / 1024
            started = time.perf_counter()
            host.reboot()
            found["reboot"] = time.perf_counter() - started
        else:
            found["memory MiB/host"] = pss_kib(processes_rooted_under(fleet.directory)) / n / 1024
    finally:
        started = time.perf_counter()
        fleet.down()
        found["down"] = time.perf_counter() - started
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    Fleet.up(n=1).down()  # the base root built and cached before anything is timed
    for _ in range(args.rounds):
        for boot in (False, True):
            results[boot].append(one_round(args.hosts, boot))
    print(f"{args.hosts} hosts, {args.rounds} rounds (best / median)")
    for key in ("up", "first ssh", "memory MiB/host", "reboot", "down"):
        line = [f"{key:>16}"]
        medians = {}
        for boot in (False, True):
            values = [r[key] for r in results[boot] if key in r]
            if not values:
                line.append(f"{'chroot' if not boot else 'booted'}: —")
                continue
            medians[boot] = statistics.median(values)
            line.append(f"{'booted' if boot else 'chroot'}: {min(values):7.2f} / {medians[boot]:7.2f}")
        if len(medians) == 2 and medians[False] > 0:
            line.append(f"booted/chroot {medians[True] / medians[False]:.1f}x")
        print("  ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
