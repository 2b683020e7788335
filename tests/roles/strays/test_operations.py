"""roles/strays/operations.py as data, the way pyinfra tests its own operations (tests/support/operation_cases.py):
each cases/stray_packages/*.json gives the facts' command output — the verifier's `strays --json` from the real
Debian 12/13 installs, and real `apt-get -s` output — and the arguments, and says which commands the operation yields,
or, when it yields none, the noop description it gives, and what it prints about the strays."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.strays.operations import stray_packages
from tests.support.operation_cases import check_operation_case, load_cases

CASES = load_cases(Path(__file__).parent / "cases" / "stray_packages")


@pytest.mark.parametrize("name, case", CASES, ids=[name for name, _ in CASES])
def test_stray_packages(name, case):
    check_operation_case(stray_packages, case)


def test_cases_exist():
    assert len(CASES) >= 6
