"""The suite runs every test file it has: `bin/test` (pytest over testpaths) collects each tests/**/test_*.py.

pytest's default norecursedirs skips directories named `venv` (and build, dist …): tests/roles/venv — the venv
stage's 82 tests — was left out of every suite run that way until pyproject.toml set the list without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_test_file_under_tests_is_collected():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    on_disk = {
        str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py") if "__pycache__" not in path.parts
    }
    assert on_disk - collected == set(), "test files pytest does not collect: " + ", ".join(sorted(on_disk - collected))
