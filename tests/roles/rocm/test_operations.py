"""roles/rocm/operations.py, data-driven (tests/roles/rocm/operations/<operation>/<case>.json): the output of each
fact's command in, the commands out — or, when there is nothing to do, the noop description. Fact outputs of hosts
with AMD's packages are written in the format of the real commands (no such host exists here: this is a mock of
Ubuntu with repo.radeon.com's packages); the same commands run for real in tests/roles/rocm/test_facts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.rocm import operations
from tests.support.operation_cases import case_ids, check_operation_case, grouped_cases

CASES = Path(__file__).parent / "operations"
ALL = grouped_cases(CASES)


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=case_ids(ALL))
def test_operation_case(operation, name, case):
    check_operation_case(getattr(operations, operation), case)


def test_every_operation_has_cases():
    public = {name for name, value in vars(operations).items() if hasattr(value, "_inner")}
    assert public == {p.name for p in CASES.iterdir()}
