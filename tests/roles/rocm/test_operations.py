"""roles/rocm/operations.py, data-driven (tests/roles/rocm/operations/<operation>/<case>.json): the output of each
fact's command in, the commands out — or, when there is nothing to do, the noop description. Fact outputs of hosts
with AMD's packages are written in the format of the real commands (no such host exists here: this is a mock of
Ubuntu with repo.radeon.com's packages); the same commands run for real in tests/roles/rocm/test_facts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.rocm import operations
from tests.support.operation_cases import load_cases, run_operation

CASES = Path(__file__).parent / "operations"
ALL = [(op, name, case) for op in sorted(p.name for p in CASES.iterdir()) for name, case in load_cases(CASES / op)]


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=[f"{op}/{name}" for op, name, _ in ALL])
def test_operation_case(operation, name, case):
    commands, noops = run_operation(getattr(operations, operation), case["facts"], **case["args"])
    assert commands == case["commands"]
    if not case["commands"]:
        # Nothing to do must say what is already true (pyinfra's own rule for its operation tests).
        assert case["noop_description"], f"{operation}/{name}: an empty command list needs a noop description"
        assert noops == [case["noop_description"]]


def test_every_operation_has_cases():
    public = {name for name, value in vars(operations).items() if hasattr(value, "_inner")}
    assert public == {p.name for p in CASES.iterdir()}
