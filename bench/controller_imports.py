"""Benchmark (not a test): the controller CPU of importing what `deploy.py` and `tasks/status.py` import, beyond what
pyinfra's own CLI has imported, from this checkout and from another one — what a change to the imports costs every
pyinfra start.

    .venv/bin/python bench/controller_imports.py [--compare DIR] [--rounds 15]

Each measurement is a fresh interpreter of this venv that imports pyinfra's CLI first, then the entry's own imports
(its `import` lines, read from the file), timed with process_time. No compiled module is read or written
(PYTHONPYCACHEPREFIX points nowhere): a checkout that nothing has compiled yet, as under pyinfra, whose CLI sets
sys.dont_write_bytecode. Interleaved rounds, medians.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import pyinfra.api, pyinfra_cli.cli, pyinfra.operations.server, pyinfra.operations.python"
ENTRIES = ("deploy.py", "tasks/status.py")


def imports_of(path: Path) -> str:
    """The entry's top-level import statements, as source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom))


def probe(checkout: Path, entry: str) -> str:
    return (
        f"{FLOOR}\nimport sys, time\nsys.dont_write_bytecode = True\nsys.path.insert(0, {str(checkout)!r})\n"
        f"started = time.process_time()\n{imports_of(checkout / entry)}\nprint(time.process_time() - started)"
    )


def measure(checkout: Path, entry: str) -> float:
    done = subprocess.run(
        [sys.executable, "-B", "-c", probe(checkout, entry)],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/nonexistent"},
        check=True,
    )
    return float(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", type=Path, help="another checkout, e.g. the code before a change")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    checkouts = {"this checkout": REPO}
    if args.compare is not None:
        checkouts["compare"] = args.compare.resolve()
    runs = [(label, entry) for label in checkouts for entry in ENTRIES]
    found = {run: [] for run in runs}
    for _ in range(args.rounds):
        random.shuffle(runs)
        for label, entry in runs:
            found[label, entry].append(measure(checkouts[label], entry))
    print(
        f"median controller CPU ms of {args.rounds} rounds, imports beyond pyinfra's CLI; load {os.getloadavg()[0]:.2f}"
    )
    print("| entry | " + " | ".join(checkouts) + " |")
    print("|---|" + "---|" * len(checkouts))
    for entry in ENTRIES:
        cells = [f"{statistics.median(found[label, entry]) * 1000:.0f}" for label in checkouts]
        print(f"| {entry} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
