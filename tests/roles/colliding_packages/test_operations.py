"""roles/colliding_packages/operations.py, data-driven (operations/<operation>/<case>.json): dpkg-query and
`apt-get -s remove` output in, commands out — or the noop description. The Ubuntu cases mock noble's versions (ROCm
issues #3656, #6367); the same operation runs for real on Debian 12 in test_real_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.colliding_packages import operations
from tests.support.operation_cases import case_ids, check_operation_case, grouped_cases

CASES = Path(__file__).parent / "operations"
ALL = grouped_cases(CASES)


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=case_ids(ALL))
def test_operation_case(operation, name, case):
    check_operation_case(getattr(operations, operation), case)
