"""Benchmark (not a test): what the apt hook costs per dpkg run and per apt run, on a real host, against peers timed in
the same run.

    sudo .venv/bin/python bench/apt_hook.py [--fleet NAME] [--host ws1] [--rounds N]

Runs inside a local test workstation (localfleet; the hook installed there by tasks/apt_hook.py) and times, round
after round so that machine load hits all alike:
  (a) the check as both hooks run it: the host's python3 on the installed verifier's launcher (its sha256 checked by
      the script, the interpreter and the version held to the launcher's rule), with the settings of the installed
      /var/lib/rocm-fleet/apt-hook/hook.sh (state written to a scratch directory: the host's results are left alone);
  (b) the same check from the same installed version without the launcher and its rule (what the rule costs);
  (c) dpkg's line when a front end holds the lock (DPKG_FRONTEND_LOCKED: the skip path of every dpkg run apt makes);
  (d) a real `dpkg -i` of a small package, which runs the check once (dpkg's hook), against (e) the same with
      DPKG_FRONTEND_LOCKED set (dpkg's hook skipped: dpkg alone);
  (f) a real `apt-get install --reinstall` of it, which calls dpkg two or more times and runs the check once at the
      end (apt's hook), against (g) the same apt run reading no apt.conf.d (no DPkg::Post-Invoke; each dpkg run
      skips dpkg's hook);
  (h) `python3 -I -c pass` (the interpreter's start alone) as a peer.
(d) and (f) run the real hooks, so they replace the host's own hook result (the check is real). Prints best and median
of each, the ratios against (h), the per-run cost of the check in (d)−(e) and (f)−(g), and whether (a) is well under
the 2 s budget (target: best under 1 s). The timing runs inside the host, so chroot/SSH start-up is not counted.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from roles.apt_hook.model import SCRIPT_PATH, dpkg_line  # noqa: E402
from roles.verifier import LAUNCHER, TOP  # noqa: E402
from tests.support.debs import build_deb  # noqa: E402

# Runs inside the host with its python3: times each command, interleaved, and prints JSON.
TIMER = r"""
import json, os, statistics, subprocess, sys, time
commands, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
times = {label: [] for label in commands}
first = next(iter(commands))
for _ in range(rounds):
    for label, (command, environment) in commands.items():
        start = time.perf_counter()
        done = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, **environment})
        times[label].append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{label}: exit {done.returncode}: {done.stdout[-500:]}")
        if label == first:
            times["_hook_output"] = done.stdout
print(json.dumps({label: {"best": min(t), "median": statistics.median(t)} if isinstance(t, list) else t
                  for label, t in times.items()}))
"""

TARGET_S = 1.0  # "well under two seconds per dpkg run"
DEB = "/tmp/rocm-fleet-bench.deb"
APT = "DEBIAN_FRONTEND=noninteractive apt-get -q -y"


def hook_arguments(script: str) -> list[str]:
    """The verifier arguments of the installed script (venv, releases), read back from it."""
    found = re.search(rf" -I -S {re.escape(LAUNCHER)} apt-hook (.*?); elif", script)
    if not found:
        raise SystemExit(f"{SCRIPT_PATH} holds no rocm-fleet check: install it with tasks/apt_hook.py first")
    return shlex.split(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default="default", help="localfleet fleet name (default: default)")
    parser.add_argument("--host", default="ws1")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    from localfleet import Fleet

    host = Fleet.attach(args.fleet).host(args.host)
    script = host.run(["cat", SCRIPT_PATH]).stdout
    arguments = hook_arguments(script)
    python = re.search(r"if \[ ! -x (\S+) \]", script).group(1)
    scratch = "/tmp/rocm-fleet-bench-state"
    common = " ".join(shlex.quote(a) for a in (*arguments, "--state-dir", scratch, "--verbose"))
    version = host.run(["readlink", f"{TOP}/current"]).stdout.strip()
    check = script.splitlines()[-1]
    unchecked = (
        f"import sys; sys.dont_write_bytecode = True; sys.path.insert(0, {TOP + '/' + version!r}); "
        "from verify.cli import main; sys.exit(main())"
    )
    with tempfile.TemporaryDirectory() as workdir:
        deb = build_deb(Path(workdir), {"Package": "rocm-fleet-bench", "Version": "1.0", "Architecture": "all"})
        (host.root / DEB.lstrip("/")).write_bytes(deb.read_bytes())
    locked = {"DPKG_FRONTEND_LOCKED": "true"}
    scratch_check = check.replace(f"apt-hook {' '.join(arguments)}", f"apt-hook {common}")
    commands = {
        "(a) the check, as the hooks run it": (scratch_check, {}),
        "(b) same, without the launcher": (f"{python} -I -S -c {shlex.quote(unchecked)} apt-hook {common}", {}),
        "(c) dpkg's line, skip path": (dpkg_line(), locked),
        "(d) dpkg -i (one check)": (f"dpkg -i {DEB}", {}),
        "(e) dpkg -i, hook skipped": (f"dpkg -i {DEB}", locked),
        "(f) apt-get --reinstall (one check)": (f"{APT} install --reinstall {DEB}", {}),
        "(g) same, no apt.conf.d": (f"{APT} -o Dir::Etc::Parts=/nonexistent install --reinstall {DEB}", {}),
        "(h) python3 -I -c pass": (f"{python} -I -c pass", {}),
    }
    try:
        done = host.run([python, "-c", TIMER, json.dumps(commands), str(args.rounds)], timeout=1800)
    finally:
        host.run(["rm", "-rf", scratch], check=False)
        host.run(["sh", "-c", f"dpkg --purge rocm-fleet-bench; rm -f {DEB}"], check=False)
    results = json.loads(done.stdout)
    status_lines = len(host.run(["cat", "/var/lib/dpkg/status"]).stdout.splitlines())

    print(f"{args.host} of fleet {args.fleet!r}: dpkg status {status_lines} lines; hook {' '.join(arguments)}")
    print(f"hook said: {results.pop('_hook_output').strip()[:300]}")
    print(f"best (median) of {args.rounds} interleaved rounds, timed inside the host:")
    pass_s = results["(h) python3 -I -c pass"]["best"]
    for label, seconds in results.items():
        ratio = seconds["best"] / pass_s
        print(f"  {label:38s} {seconds['best']:6.3f} s ({seconds['median']:6.3f} s)  = {ratio:6.1f} x (h)")
    best = {label: seconds["best"] for label, seconds in results.items()}
    hook_s, bare_s = best["(a) the check, as the hooks run it"], best["(b) same, without the launcher"]
    print(f"the launcher and its rules cost {hook_s - bare_s:.3f} s per check ({hook_s / bare_s:.2f} x)")
    dpkg_s = best["(d) dpkg -i (one check)"] - best["(e) dpkg -i, hook skipped"]
    apt_s = best["(f) apt-get --reinstall (one check)"] - best["(g) same, no apt.conf.d"]
    print(f"per plain dpkg run the hook adds {dpkg_s:.3f} s; per apt run {apt_s:.3f} s (one check each)")
    skip_ms = best["(c) dpkg's line, skip path"] * 1000
    print(f"dpkg's line when apt holds the lock: {skip_ms:.1f} ms per dpkg run")
    ok = hook_s < TARGET_S
    verdict = "well under" if ok else "NOT well under"
    print(f"check {hook_s:.3f} s: {verdict} the 2 s budget (target < {TARGET_S:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
