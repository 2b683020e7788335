"""roles/verification/fleet.py: the summary writer at the end of a run, on pyinfra's own State and Inventory (no host
is connected here: what the writer reads of a run is which hosts were in it and which of them connected)."""

from __future__ import annotations

import json

from pyinfra.api import Config, Inventory, State

from roles.verification.fleet import FleetSummary
from roles.verification.host_row import NOT_VERIFIED, row_for
from tests.support.fleet_reports import fleet_of
from verify.report.report import Report


def run_of(names: list[str], connected: list[str]) -> State:
    inventory = Inventory((names, {}))
    state = State(inventory, Config())
    for name in connected:
        state.activate_host(inventory.get_host(name))
    return state


def count_judgements(monkeypatch) -> list[str]:
    """Each Report.judge call (the schema check and the one rule over the whole report), by host name."""
    judged: list[str] = []
    judge = Report.judge

    def counted(self, **known):
        judged.append(self.host.hostname)
        return judge(self, **known)

    monkeypatch.setattr(Report, "judge", counted)
    return judged


def test_each_hosts_report_is_judged_once_for_the_history_both_files_and_the_log_line(tmp_path, monkeypatch):
    outcomes = fleet_of(pass_=3, no_rocm=2, strays=1, unreachable=1)
    names = [o.host for o in outcomes] + ["ws99"]  # ws99: connected, then nothing recorded (it failed earlier)
    state = run_of(names, [o.host for o in outcomes if o.report is not None] + ["ws99"])
    summary = FleetSummary(tmp_path)
    for outcome in outcomes:
        if outcome.report is not None:
            summary.record(outcome)
    judged = count_judgements(monkeypatch)
    markdown, page = summary.write(state)
    reported = sorted(o.report.host.hostname for o in outcomes if o.report is not None)
    assert sorted(judged) == reported
    # The rows written are the rows of the outcomes: the verdicts in the history and in both files.
    rows = {o.host: row_for(o) for o in outcomes}
    history = json.loads((tmp_path / "history.json").read_text())["hosts"]
    assert {host: entries[-1]["verdict"] for host, entries in history.items()} == {
        **{host: row.verdict for host, row in rows.items()},
        "ws99": NOT_VERIFIED.upper(),
    }
    text = markdown.read_text()
    assert text.startswith("# rocm-fleet verification\n\n8 host(s): 3 pass, 3 fail, 1 not verified, 1 unreachable")
    assert "| ws99 | **NOT VERIFIED** |" in text and "verification did not run on this host" in text
    assert all(f"| {host} | **{row.verdict}** |" in text for host, row in rows.items())
    assert all(f'<td class="host">{host}</td>' in page.read_text() for host in names)


def test_the_status_line_and_the_summary_share_the_row_of_the_outcome_recorded(tmp_path, monkeypatch):
    outcome = fleet_of(pass_=1, no_rocm=0, strays=0, unreachable=0)[0]
    summary = FleetSummary.for_status(tmp_path)
    summary.record(outcome)
    judged = count_judgements(monkeypatch)
    row = summary.row_of(outcome)  # what the status stage logs for the host
    assert row == row_for(outcome) and row.verdict == "PASS"
    del judged[:]
    summary.write(run_of([outcome.host], [outcome.host]))
    assert judged == []  # the summary wrote the row the status line showed
    again = summary.row_of(outcome)
    assert again is row
    newer = fleet_of(pass_=0, no_rocm=1, strays=0, unreachable=0)[0]
    summary.record(type(outcome)(outcome.host, outcome.state, newer.report))  # recorded again: a row of its own
    assert summary.row_of(summary.recorded[outcome.host]).verdict == "FAIL"
