"""roles/apt_hook/operations.py as data, the way pyinfra tests its own operations: each cases/apt_hook/*.json gives
what the AptHookFiles fact's command printed on a host (parsed by the fact's real `process`), the operation's
arguments, and the commands it must yield — or, when none, the noop description it must give. The commands themselves
are proven on real hosts in test_real_runs.py (a Debian 12 root) and tests/tasks/test_apt_hook_fleet.py (over SSH)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roles.apt_hook.operations import apt_hook
from tests.support.operation_cases import check_operation_case, load_cases

CASES = load_cases(Path(__file__).parent / "cases" / "apt_hook")


@pytest.mark.parametrize("name, case", CASES, ids=[name for name, _ in CASES])
def test_apt_hook(name, case):
    check_operation_case(apt_hook, case)


def test_installed_then_already_installed_then_removed_are_all_covered():
    names = {name for name, _ in CASES}
    assert {
        "not_installed",
        "installed_and_up_to_date",
        "removed_when_installed",
        "removed_when_not_installed",
    } <= names
