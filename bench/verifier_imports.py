"""Benchmark (not a test): what the installed verifier costs a host per run, and what of it is the launcher's rule.

    sudo .venv/bin/python bench/verifier_imports.py [--rounds 15] [--venv PATH]

This checkout's verifier is installed in a scratch directory by the host's own install script (roles/verifier.py:
unpacked, byte-compiled by this machine's python3, sealed), then run by that python3 as a host runs it (as root),
interleaved in a new order every round, CPU (user + system) from wait4:
- "launcher": `python3 -I -S launcher.py --version V COMMAND …`, what every caller runs: the version held to the rule
  (verify/launcher.py: every file's owner, mode and sha256), then the command;
- "no rule": the same installed version run without the launcher (its directory put on sys.path by hand): what a run
  costs without the check;
- "rule alone": `launcher.py --check DIR V`, and `python3 -I -S -c pass`, the interpreter's start.
Commands: `strays --json` (every deploy's read-ahead asks it), `check --static-only` against --venv (default this
checkout's .venv; the apt hook's work, whatever its verdict) and `kept` (the status task's question). Medians, and
launcher ÷ no rule.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from roles.verifier import archive, install_script, version  # noqa: E402

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def cpu(argv: list[str]) -> float:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    _, _, usage = os.wait4(process.pid, 0)
    return usage.ru_utime + usage.ru_stime


def install(top: Path) -> Path:
    """This checkout's verifier installed in `top` by the host's install script (this machine's python3)."""
    top.mkdir(mode=0o755)
    partial = top / ".upload.bench"
    partial.write_bytes(archive())
    path = f"{Path(PYTHON3).parent}:/usr/sbin:/usr/bin:/sbin:/bin"
    script = install_script(str(partial), "bench", top=str(top), legacy=())
    subprocess.run(["sh", "-c", script], check=True, env={"PATH": path})
    return top / version()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--venv", type=Path, default=REPO / ".venv")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the verifier is root's only (sudo .venv/bin/python bench/verifier_imports.py)")
    scratch = Path(tempfile.mkdtemp(prefix="verifier-imports-"))
    scratch.chmod(0o755)
    try:
        directory = install(scratch / "verifier")
        launcher = str(scratch / "verifier" / "launcher.py")
        bare = (
            f"import sys; sys.dont_write_bytecode = True; sys.path.insert(0, {str(directory)!r}); "
            "from verify.cli import main; sys.exit(main())"
        )
        ways = {
            "launcher": [PYTHON3, "-I", "-S", launcher, "--version", version()],
            "no rule": [PYTHON3, "-I", "-S", "-c", bare],
        }
        commands = {
            "strays --json": ["strays", "--json"],
            "check --static-only": [
                *("check", "--static-only", "--venv", str(args.venv), "--expect-rocm", "7.2.4"),
                *("--expect-bitsandbytes", "0.50.1", "--device", "cpu", "--no-gpu-required", "--json"),
            ],
            "kept": ["kept"],
        }
        runs = {(command, way): [*ways[way], *words] for command, words in commands.items() for way in ways}
        runs["rule alone", ""] = [PYTHON3, "-I", "-S", launcher, "--check", str(directory), version()]
        runs["python3 -I -S -c pass", ""] = [PYTHON3, "-I", "-S", "-c", "pass"]
        for argv in runs.values():  # the page cache warm for all
            cpu(argv)
        found = {key: [] for key in runs}
        order = list(runs)
        for _ in range(args.rounds):
            random.shuffle(order)
            for key in order:
                found[key].append(cpu(runs[key]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    med = {key: statistics.median(values) * 1000 for key, values in found.items()}
    print(f"median CPU ms of {args.rounds} rounds ({PYTHON3} -I -S …, as root); load {os.getloadavg()[0]:.2f}")
    print("| command | launcher | no rule | launcher ÷ no rule |")
    print("|---|---|---|---|")
    for command in commands:
        a, b = med[command, "launcher"], med[command, "no rule"]
        print(f"| {command} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    print(f"the rule alone (launcher.py --check): {med['rule alone', '']:.1f} ms; ", end="")
    print(f"python3 -I -S -c pass: {med['python3 -I -S -c pass', '']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
