"""roles/strays/operations.py as data, the way pyinfra tests its own operations (tests/support/operation_cases.py):
each cases/stray_packages/*.json gives the facts' command output — the verifier's `strays --json` from the real
Debian 12/13 installs, and real `apt-get -s` output — and the arguments, and says which commands the operation yields,
or, when it yields none, the noop description it gives, and what it prints about the strays."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyinfra.context import ctx_host, ctx_state

from roles.strays.operations import stray_packages
from tests.support.operation_cases import OutputHost, load_cases, render

CASES = load_cases(Path(__file__).parent / "cases" / "stray_packages")


@pytest.mark.parametrize("name, case", CASES, ids=[name for name, _ in CASES])
def test_stray_packages(name, case):
    host = OutputHost(case["facts"])
    with ctx_state.use(host.state), ctx_host.use(host):
        commands = [render(command) for command in stray_packages._inner(**case["args"])]
    assert commands == case["commands"]
    if not case["commands"]:
        assert host.noops == [case["noop_description"]], "an operation that does nothing must say why"
    else:
        assert host.noops == []
    if "logged" in case:
        assert host.logged == case["logged"]


def test_cases_exist():
    assert len(CASES) >= 6
