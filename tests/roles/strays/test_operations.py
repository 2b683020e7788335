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


def test_a_verifier_that_cannot_run_waits_for_the_install_when_planning_and_fails_the_host_when_it_runs():
    """The fact says null (this checkout's verifier is not installed, or would not run: see test_facts): while
    planning, the operation decides after the install; running — after the install — it must run, so the host fails
    with one line."""
    from pyinfra.context import ctx_host, ctx_state

    from roles.verifier import LAUNCHER
    from tests.support.operation_cases import OutputHost, render

    failed = (
        f"fail: strays: the verifier this run installed did not run (python3 -I -S {LAUNCHER} --check says why) — "
        "run the deploy again"
    )
    for executing, expected in ((False, []), (True, [failed])):
        host = OutputHost({"DistroRocmStrays": ["null"]})
        host.state.is_executing = executing
        with ctx_state.use(host.state), ctx_host.use(host):
            commands = [render(command) for command in stray_packages._inner(policy="remove")]
        assert commands == expected
        assert host.noops == (
            [] if executing else ["stray distro ROCm packages: read when this runs, after the verifier is installed"]
        )
