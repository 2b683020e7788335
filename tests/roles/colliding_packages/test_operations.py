"""roles/colliding_packages/operations.py, data-driven (operations/<operation>/<case>.json): dpkg-query and
`apt-get -s remove` output in, commands out — or the noop description. The Ubuntu cases mock noble's versions (ROCm
issues #3656, #6367); the same operation runs for real on Debian 12 in test_real_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.colliding_packages import operations
from tests.support.operation_cases import load_cases, run_operation

CASES = Path(__file__).parent / "operations"
ALL = [(op, name, case) for op in sorted(p.name for p in CASES.iterdir()) for name, case in load_cases(CASES / op)]


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=[f"{op}/{name}" for op, name, _ in ALL])
def test_operation_case(operation, name, case):
    commands, noops = run_operation(getattr(operations, operation), case["facts"], **case["args"])
    assert commands == case["commands"]
    if not case["commands"]:
        assert case["noop_description"], f"{operation}/{name}: an empty command list needs a noop description"
        assert noops == [case["noop_description"]]
