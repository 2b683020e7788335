"""Benchmark (not a test): what the verifier's bytecode cache (verify/bytecode_cache.py) saves a host per run.

    sudo .venv/bin/python bench/verifier_imports.py [--rounds 15] [--venv PATH]

The archive the deploy uploads (roles/verifier.py zipapp_bytes), run by this machine's python3 as a host runs it
(`python3 -I -S verify.pyz …`, as root) in three ways, interleaved in a new order every round, CPU (user + system)
from wait4:
- "no cache": the archive in a directory others may write (mode 0775), where the cache is never used — what every
  run cost before the cache: zipimport compiles each module, twice;
- "cache": the archive in a root-only directory, its cache filled by one untimed run first;
- peer, "unpacked": the same files unpacked and byte-compiled by python3 -m compileall — how the apt hook runs its
  own copy (roles/apt_hook/model.py); the least a run from source files with byte-code can cost.
Commands: `strays --json` (every deploy's read-ahead asks it) and `check --static-only` against --venv (default this
checkout's .venv; the verification stage's static part, whatever its verdict). Medians, and cache ÷ no cache,
cache ÷ unpacked.
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
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from roles.verifier import zipapp_bytes  # noqa: E402

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def cpu(argv: list[str]) -> float:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    _, _, usage = os.wait4(process.pid, 0)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--venv", type=Path, default=REPO / ".venv")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the cache is root's only (sudo .venv/bin/python bench/verifier_imports.py)")
    scratch = Path(tempfile.mkdtemp(prefix="verifier-imports-"))
    try:
        archive = zipapp_bytes()
        places = {}
        for label, mode in (("no cache", 0o775), ("cache", 0o755)):
            directory = scratch / label.replace(" ", "-")
            directory.mkdir(mode=mode)
            directory.chmod(mode)
            (directory / "verify.pyz").write_bytes(archive)
            places[label] = str(directory / "verify.pyz")
        unpacked = scratch / "unpacked"
        with zipfile.ZipFile(places["cache"]) as opened:
            opened.extractall(unpacked)
        subprocess.run([PYTHON3, "-m", "compileall", "-q", str(unpacked)], check=True, stdout=subprocess.DEVNULL)
        places["unpacked"] = str(unpacked)
        commands = {
            "strays --json": ["strays", "--json"],
            "check --static-only": [
                "check",
                "--static-only",
                "--venv",
                str(args.venv),
                "--expect-rocm",
                "7.2.4",
                "--expect-bitsandbytes",
                "0.50.1",
                "--device",
                "cpu",
                "--no-gpu-required",
                "--json",
            ],
        }
        for words in commands.values():  # fills the cache, and the page cache for all three
            for place in places.values():
                cpu([PYTHON3, "-I", "-S", place, *words])
        if not (scratch / "cache" / "bytecode").is_dir() or (scratch / "no-cache" / "bytecode").exists():
            sys.exit("the cache was not used where it should be, or used where it must not be")
        found = {(command, label): [] for command in commands for label in places}
        runs = list(found)
        for _ in range(args.rounds):
            random.shuffle(runs)
            for command, label in runs:
                found[command, label].append(cpu([PYTHON3, "-I", "-S", places[label], *commands[command]]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"median CPU ms of {args.rounds} rounds ({PYTHON3} -I -S …, as root)")
    print("| command | no cache | cache | unpacked (peer) | cache ÷ no cache | cache ÷ unpacked |")
    print("|---|---|---|---|---|---|")
    for command in commands:
        med = {label: statistics.median(found[command, label]) * 1000 for label in places}
        print(
            f"| {command} | {med['no cache']:.1f} | {med['cache']:.1f} | {med['unpacked']:.1f} | "
            f"{med['cache'] / med['no cache']:.2f} | {med['cache'] / med['unpacked']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
