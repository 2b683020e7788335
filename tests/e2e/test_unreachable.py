"""One host unreachable (its sshd stopped) during the whole deploy on the shared fleet (conftest.py): the other hosts
finish, the summary marks it UNREACHABLE, and the run's exit code is non-zero because of it."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import PLAIN, STANDIN, STRAYS
from tests.support.fleet_deploy import deploy, host_lines, read_reports, summary_finding, summary_row

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

DOWN, UP = PLAIN, (STRAYS, STANDIN)
LAST_OPERATION = "tasks/verify.py | Verify | Save the report, judge the host"


def test_an_unreachable_host_is_marked_the_others_finish_and_the_run_fails(deployed):
    host = deployed.host(DOWN)
    before = read_reports(deployed.reports_dir, (*UP, DOWN))
    host.stop_sshd()
    try:
        # `_ignore_errors` so that the verification failures every host has here by design do not fail the reachable
        # hosts: the exit code can then only come from the unreachable one (and pyinfra prints its --json results).
        run = deploy(deployed.fleet.inventory, "deploy.py", "_ignore_errors=true")
    finally:
        host.start_sshd()
    assert run.returncode == 1, run.explain()
    assert run.results["failed_hosts"] == [DOWN], run.explain()
    assert f"[{DOWN}] Could not connect" in run.log, run.log[-3000:]

    # The others ran the deploy to its last operation, and left fresh reports.
    last = next(op for op in run.results["operations"] if op["name"] == LAST_OPERATION)
    assert sorted(last["success"] + last["error"]) == sorted(UP), last
    after = read_reports(deployed.reports_dir, (*UP, DOWN))
    for name in UP:
        assert after[name]["generated_at"] != before[name]["generated_at"], name
        assert any(line.startswith(f"{name}: verification failed — ") for line in host_lines(run.log, name))
    assert after[DOWN] == before[DOWN]  # nothing new from the unreachable host

    summary = (deployed.reports_dir / "summary.md").read_text(encoding="utf-8")
    assert summary_row(summary, DOWN).startswith(f"| {DOWN} | **UNREACHABLE** | — |"), summary
    assert summary_finding(summary, DOWN) == "**UNREACHABLE** could not connect"
    assert "3 host(s): 2 fail, 1 unreachable" in summary
    # The unreachable host's old report is not passed off as this run's.
    assert "linkage" not in summary_row(summary, DOWN).lower()

    # It is reachable again for the tests after this one.
    assert host.ssh(["true"]).returncode == 0
