"""Benchmark (not a test): what the apt hook costs each dpkg run, on a real host, against peers timed in the same run.

    sudo .venv/bin/python bench/apt_hook.py [--fleet NAME] [--host ws1] [--rounds N]

Runs inside a local test workstation (localfleet; the hook installed there by tasks/apt_hook.py) and times, round
after round so that machine load hits all alike:
  (a) the hook as apt runs it: the host's python3 on the installed verifier's launcher (its sha256 checked by the
      hook line, the version held to the launcher's rule: every file's sha256), with the settings of the installed
      /etc/apt/apt.conf.d/80rocm-fleet-verify (state written to a scratch directory, so the host's own hook results
      are left alone);
  (b) the same check from the same installed version without the launcher and its rule (what the rule costs);
  (c) `python3 -I -c pass` (the interpreter's start alone) and (d) `dpkg -l` (a small dpkg run), as peers.
Prints best and median of each, the ratios against (c) and (d), and whether (a) is well under the 2 s budget
(target: best under 1 s). The timing runs inside the host, so chroot/SSH start-up is not counted.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from roles.apt_hook.model import CONF_PATH  # noqa: E402
from roles.verifier import LAUNCHER, TOP  # noqa: E402

# Runs inside the host with its python3: times each command, interleaved, and prints JSON.
TIMER = r"""
import json, statistics, subprocess, sys, time
commands, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
times = {label: [] for label in commands}
first = next(iter(commands))
for _ in range(rounds):
    for label, command in commands.items():
        start = time.perf_counter()
        done = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        times[label].append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{label}: exit {done.returncode}: {done.stdout[-500:]}")
        if label == first:
            times["_hook_output"] = done.stdout
print(json.dumps({label: {"best": min(t), "median": statistics.median(t)} if isinstance(t, list) else t
                  for label, t in times.items()}))
"""

TARGET_S = 1.0  # "well under two seconds per dpkg run"


def hook_arguments(config: str) -> list[str]:
    """The verifier arguments of the installed hook line (venv, releases), read back from the apt configuration."""
    found = re.search(rf" -I -S {re.escape(LAUNCHER)} apt-hook (.*?); elif", config)
    if not found:
        raise SystemExit(f"{CONF_PATH} holds no rocm-fleet hook line: install it with tasks/apt_hook.py first")
    return shlex.split(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default="default", help="localfleet fleet name (default: default)")
    parser.add_argument("--host", default="ws1")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    from localfleet import Fleet

    host = Fleet.attach(args.fleet).host(args.host)
    config = host.run(["cat", CONF_PATH]).stdout
    arguments = hook_arguments(config)
    python = re.search(r"if \[ ! -x (\S+) \]", config).group(1)
    scratch = "/tmp/rocm-fleet-bench-state"
    common = " ".join(shlex.quote(a) for a in (*arguments, "--state-dir", scratch, "--verbose"))
    version = host.run(["readlink", f"{TOP}/current"]).stdout.strip()
    hook_line = re.search(r'DPkg::Post-Invoke \{ "(.*)"; \};', config).group(1)
    unchecked = (
        f"import sys; sys.dont_write_bytecode = True; sys.path.insert(0, {TOP + '/' + version!r}); "
        "from verify.cli import main; sys.exit(main())"
    )
    commands = {
        "(a) hook, as apt runs it": hook_line.replace(f"apt-hook {' '.join(arguments)}", f"apt-hook {common}"),
        "(b) same, without the launcher": f"{python} -I -S -c {shlex.quote(unchecked)} apt-hook {common}",
        "(c) python3 -I -c pass": f"{python} -I -c pass",
        "(d) dpkg -l": "dpkg -l",
    }
    try:
        done = host.run([python, "-c", TIMER, json.dumps(commands), str(args.rounds)], timeout=600)
    finally:
        host.run(["rm", "-rf", scratch], check=False)
    results = json.loads(done.stdout)
    status_lines = len(host.run(["cat", "/var/lib/dpkg/status"]).stdout.splitlines())

    print(f"{args.host} of fleet {args.fleet!r}: dpkg status {status_lines} lines; hook {' '.join(arguments)}")
    print(f"hook said: {results.pop('_hook_output').strip()[:300]}")
    print(f"best (median) of {args.rounds} interleaved rounds, timed inside the host:")
    pass_s, dpkg_s = results["(c) python3 -I -c pass"]["best"], results["(d) dpkg -l"]["best"]
    for label, seconds in results.items():
        ratios = f"= {seconds['best'] / pass_s:5.1f} x (c), {seconds['best'] / dpkg_s:5.1f} x (d)"
        print(f"  {label:34s} {seconds['best']:6.3f} s ({seconds['median']:6.3f} s)  {ratios}")
    hook_s, bare_s = results["(a) hook, as apt runs it"]["best"], results["(b) same, without the launcher"]["best"]
    print(f"the launcher and its rule cost {hook_s - bare_s:.3f} s per dpkg run ({hook_s / bare_s:.2f} x)")
    ok = hook_s < TARGET_S
    print(
        f"hook {hook_s:.3f} s per dpkg run: {'well under' if ok else 'NOT well under'} the 2 s budget "
        f"(target < {TARGET_S:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
