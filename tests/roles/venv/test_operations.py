"""roles/venv/operations.py as data, the way pyinfra tests its own operations (tests/support/operation_cases.py):
cases/<operation>/*.json give each fact's command output (dpkg-query's, the venv's own interpreter's) and the
arguments, and say which commands the operation yields — or, when none, the noop description it gives. So every
"already done" path is pinned down, e.g. torch 2.13.0+rocm7.2 counts as installed, which pyinfra's pip fact cannot
see."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.venv import operations
from tests.support.operation_cases import load_cases, run_operation

CASES = Path(__file__).parent / "cases"
ALL = [(f"{op.name}/{name}", op.name, case) for op in sorted(CASES.iterdir()) for name, case in load_cases(op)]


@pytest.mark.parametrize("case_id, operation, case", ALL, ids=[case_id for case_id, _, _ in ALL])
def test_operation(case_id, operation, case):
    commands, noops = run_operation(getattr(operations, operation), case["facts"], **case["args"])
    assert commands == case["commands"]
    if case["commands"]:
        assert noops == []
    else:
        assert noops == [case["noop_description"]], "an operation that does nothing must say why"


def test_every_operation_has_cases():
    names = {path.name for path in CASES.iterdir()}
    assert names == {"python3_venv_package", "venv_directory", "venv_packages"}
    assert all(len(list((CASES / name).glob("*.json"))) >= 2 for name in names)
