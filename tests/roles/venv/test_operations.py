"""roles/venv/operations.py as data, the way pyinfra tests its own operations (tests/support/operation_cases.py):
cases/<operation>/*.json give each fact's command output (dpkg-query's, the venv's own interpreter's) and the
arguments, and say which commands the operation yields — or, when none, the noop description it gives. So every
"already done" path is pinned down, e.g. torch 2.13.0+rocm7.2 counts as installed, which pyinfra's pip fact cannot
see."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.venv import operations
from tests.support.operation_cases import case_ids, check_operation_case, grouped_cases

CASES = Path(__file__).parent / "cases"
ALL = grouped_cases(CASES)


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=case_ids(ALL))
def test_operation_case(operation, name, case):
    check_operation_case(getattr(operations, operation), case)


def test_every_operation_has_cases():
    names = {path.name for path in CASES.iterdir()}
    assert names == {"python3_venv_package", "venv_directory", "venv_packages"}
    assert all(len(list((CASES / name).glob("*.json"))) >= 2 for name in names)
