"""roles/boot_check/operations.py, data-driven (operations/<operation>/<case>.json): the BootUnit fact's output in,
the commands out — or, when nothing is to be done, the noop description."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.boot_check import facts, operations
from tests.support.operation_cases import (
    case_ids,
    check_operation_case,
    grouped_cases,
    jsonable,
    process_fact,
)

ALL = grouped_cases(Path(__file__).parent / "operations")
FACTS = grouped_cases(Path(__file__).parent / "facts")


@pytest.mark.parametrize(("operation", "name", "case"), ALL, ids=case_ids(ALL))
def test_operation_case(operation, name, case):
    check_operation_case(getattr(operations, operation), case)


@pytest.mark.parametrize(("fact", "name", "case"), FACTS, ids=case_ids(FACTS))
def test_fact_case(fact, name, case):
    assert jsonable(process_fact(getattr(facts, fact), case["output"])) == case["fact"]
