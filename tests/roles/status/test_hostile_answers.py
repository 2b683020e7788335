"""One host never breaks the fleet's view (issue 26, item 3): whatever a host keeps or answers, the controller's reader
makes that host's row — NOT VERIFIED, naming the file and why — and the status and the summary of every other host
are written. The kept files are real files read by the host's own reader (verify/report/kept_files.py); the answers go
through the status fact's own parser (roles/status/facts.py). Each case made the reader raise before."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from roles.status.facts import KeptResults
from roles.status.model import outcome_of
from roles.verification.host_row import NOT_VERIFIED, VERIFIED, row_for
from roles.verification.summary import html_of, markdown_of
from tests.support.fleet_reports import report_of
from tests.support.report_samples import edited
from verify.report.hook_state import HookResult
from verify.report.kept_files import read_kept_files

PASSED = report_of("ws1", "pass", at="2026-12-01T17:00:00Z")
GOOD = PASSED.to_json()
NOW_S = 1796155200.0
VERIFY = "last-verify.json"


def _hook(report) -> str:
    """The apt hook's last.json as the hook writes it (verify/report/hook_state.py)."""
    static = replace(report, request=replace(report.request, static_only=True), document=None)
    return json.dumps(HookResult("2026-12-01T18:00:00Z", static).to_json())


def _set_check_reason(value):
    return lambda r: r["checks"][0].__setitem__("reason", value)


# file (under /var/lib/rocm-fleet), its contents, what the row must say about it
KEPT_CASES = {
    "nesting deeper than json's recursion limit": (VERIFY, "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "a check whose reason is a number": (
        VERIFY,
        json.dumps(edited(GOOD, _set_check_reason(5))),
        "checks[].reason is a number, not a string",
    ),
    "a check whose reason is a list": (
        VERIFY,
        json.dumps(edited(GOOD, _set_check_reason(["x"]))),
        "checks[].reason is a list, not a string",
    ),
    "a number too large for a float": (
        VERIFY,
        json.dumps(GOOD).replace('"generated_at"', '"padding": 1e400, "generated_at"', 1),
        "the number 1e400 is too large",
    ),
    "a verdict that is an object": (
        VERIFY,
        json.dumps(edited(GOOD, lambda r: r.__setitem__("verdict", {"x": 1}))),
        "is not one of",
    ),
    "a host name that is a number": (
        VERIFY,
        json.dumps(edited(GOOD, lambda r: r["host"].__setitem__("hostname", 7))),
        "host.hostname is a number, not a string",
    ),
    "a report that is a list": (VERIFY, json.dumps([GOOD]), "not a JSON object"),
    "an apt hook result whose report has a NaN": (
        "apt-hook/last.json",
        _hook(PASSED).replace('"pass"', "NaN", 1),
        "NaN",
    ),
    "an apt hook result whose time is a number": (
        "apt-hook/last.json",
        _hook(PASSED).replace('"2026-12-01T18:00:00Z"', "1e308"),
        "apt-hook/last.json cannot be used",
    ),
    "a boot check result that is nested too deeply": ("boot-check/last.json", "{" + '"a":{' * 200 + "}" * 201, "deep"),
}


@pytest.mark.parametrize("case", KEPT_CASES.values(), ids=KEPT_CASES.keys())
def test_a_kept_file_the_reader_cannot_use_is_that_hosts_finding_naming_file_and_why(tmp_path, case):
    relative, text, why = case
    root = tmp_path / "rocm-fleet"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text)
    answer = dict(read_kept_files(str(root)), now=NOW_S, hostname="ws1")
    outcome = outcome_of("ws1", answer)
    lines = " ".join(outcome.unusable) + " " + (outcome.detail or "")
    assert outcome.state == NOT_VERIFIED or relative != VERIFY, outcome
    assert f"{root / relative} cannot be used" in lines and why in lines, lines
    _written_with_the_others(outcome)


# The status program's whole answer (its stdout), as a host that is not ours could print it.
ANSWER_CASES = {
    "a NaN clock": ('{"now": NaN, "hostname": "ws1", "files": {}}', "NaN is not JSON"),
    "an infinite clock": ('{"now": Infinity, "hostname": "ws1", "files": {}}', "Infinity is not JSON"),
    "a clock of 1e400": ('{"now": 1e400, "hostname": "ws1", "files": {}}', "the number 1e400 is too large"),
    "nesting deeper than json's recursion limit": ('{"now": 1, "files": ' + "[" * 100_000, "nested too deeply"),
    "files that are a list": ('{"now": 1, "hostname": "ws1", "files": []}', "it is not what kept_files.py prints"),
    "an answer that is a string": ('"ok"', "ok"),
    "a traceback": ("Traceback (most recent call last):\n  ...\nMemoryError", "MemoryError"),
}


@pytest.mark.parametrize("case", ANSWER_CASES.values(), ids=ANSWER_CASES.keys())
def test_an_answer_the_reader_cannot_use_is_that_hosts_finding(case):
    output, why = case
    outcome = outcome_of("ws1", KeptResults().process(output.splitlines()))
    lines = " ".join(outcome.unusable) + " " + (outcome.detail or "")
    assert outcome.state == NOT_VERIFIED and why in lines, lines
    _written_with_the_others(outcome)


def test_a_clock_the_reader_cannot_use_inside_an_answer_is_left_out_not_raised(tmp_path):
    """An answer that reached the model with a non-finite clock (not through the strict parser): the controller's
    time is used instead, and the row is still made."""
    root = tmp_path / "rocm-fleet"
    root.mkdir()
    (root / VERIFY).write_text(json.dumps(GOOD))
    for clock in (math.nan, math.inf, -math.inf):
        answer = dict(read_kept_files(str(root)), now=clock, hostname="ws1")
        outcome = outcome_of("ws1", answer, now=NOW_S)
        assert outcome.state == VERIFIED and outcome.as_of == "2026-12-01 17:00Z (3 h ago)"


def _written_with_the_others(outcome) -> None:
    """The hostile host's row beside a healthy one's, in both files: nothing raised, both hosts there."""
    healthy_root = {"now": NOW_S, "hostname": "ws2", "files": {}}
    rows = [row_for(outcome), row_for(outcome_of("ws2", healthy_root))]
    markdown = markdown_of(rows, title="t", generated_at="now")
    page = html_of(rows, title="t", generated_at="now")
    assert "| ws1 | **NOT VERIFIED** |" in markdown and "| ws2 |" in markdown
    assert "ws1" in page and "ws2" in page


# What `verify kept` says beside the results (issue 26 item 2: the boot id, dpkg's changes), as a host could say it.
ESC = "\x1b]52;c;cHduZWQ=\x07\x1b[2K\r"
BESIDE_CASES = {
    "a boot id that is a number": {"boot_id": 5},
    "a boot id of 10,000 characters": {"boot_id": "x" * 10_000},
    "dpkg that is a string": {"dpkg": "changed"},
    "changes that are a string": {"dpkg": {"changes": "all of them"}},
    "a change of the wrong shape": {"dpkg": {"changes": [[1], {"time": 1}, None]}},
    "a change at a NaN time": {"dpkg": {"changes": [[math.nan, "install", "libx", None, "1"]]}},
    "a change past the year 9999": {"dpkg": {"changes": [[1e300, "install", "libx", None, "1"]]}},
    "a change of an action dpkg has not": {"dpkg": {"changes": [[NOW_S, "rm -rf", "libx", None, "1"]]}},
    "a status file's time of 1e300": {"dpkg": {"changes": [], "status_mtime": 1e300}},
    "a status file's time that is a string": {"dpkg": {"error": 7, "status_mtime": "now"}},
    "a million changes": {"dpkg": {"changes": [[0, "install", "libx", None, "1"]] * 1_000_000}},
}


@pytest.mark.parametrize("beside", BESIDE_CASES.values(), ids=BESIDE_CASES.keys())
def test_what_a_host_says_beside_its_results_is_left_out_when_it_is_not_what_the_reader_takes(tmp_path, beside):
    root = tmp_path / "rocm-fleet"
    root.mkdir()
    (root / VERIFY).write_text(json.dumps(GOOD))
    answer = dict(read_kept_files(str(root)), now=NOW_S, hostname="ws1", **beside)
    outcome = outcome_of("ws1", answer)
    assert outcome.state == VERIFIED and outcome.unseen == () and row_for(outcome).verdict == "PASS"


def test_text_a_host_says_beside_its_results_is_inert(tmp_path):
    root = tmp_path / "rocm-fleet"
    root.mkdir()
    (root / VERIFY).write_text(json.dumps(GOOD))
    changes = [[NOW_S - 60, "install", f"lib{ESC}x:amd64", None, f"1{ESC}"]]
    answer = dict(read_kept_files(str(root)), now=NOW_S, hostname="ws1", dpkg={"changes": changes})
    row = row_for(outcome_of("ws1", answer))
    assert row.verdict == "WARN" and "packages changed since" in row.reason
    rebooted = row_for(outcome_of("ws1", dict(answer, boot_id=f"b{ESC}")))  # only compared, never printed
    assert rebooted.verdict == "WARN" and rebooted.as_of.endswith("⚠ packages changed")
    for text in (
        row.reason,
        markdown_of([row], title="t", generated_at="now"),
        html_of([row], title="t", generated_at="now"),
    ):
        assert "lib" in text and not any(c in text for c in "\x1b\x07\r"), text
