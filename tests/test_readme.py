"""The README's opening commands: the two a newcomer types, and the one CI runs (.ci/run must run that very line)."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _opening_commands() -> list[str]:
    block = re.search(r"^```sh\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    assert block, "README.md has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_the_main_job_and_the_test_suite():
    assert _opening_commands() == ["bin/demo", "bin/test"]
    for command in _opening_commands():
        assert os.access(REPO / command, os.X_OK), command


def test_ci_runs_the_readmes_test_command_line_for_line():
    test_command = _opening_commands()[1]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert os.access(REPO / ".ci" / "run", os.X_OK)
    run_lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert run_lines[-1] == test_command, run_lines  # the last thing CI does, so its exit status is CI's
