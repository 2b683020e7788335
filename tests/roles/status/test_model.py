"""roles/status/model.py: from what a host keeps to its status row — which result the row rests on, what can only make
it worse, and how old each one is. The answers are what kept_files.read_kept_files() returns for real files."""

from __future__ import annotations

import json
from dataclasses import replace

from roles.status.model import NO_REPORT, age, outcome_of
from roles.verification.host_row import NOT_VERIFIED, VERIFIED, row_for
from tests.support.fleet_reports import STRAY, report_of
from verify.report.boot_state import BootResult
from verify.report.hook_state import HookResult
from verify.report.kept_files import read_kept_files

NOW_S = 1796155200.0  # 2026-12-01T20:00:00Z: the host's clock when it answered


def keep(tmp_path, verification=None, hook=None, boot=None) -> dict:
    """A host's /var/lib/rocm-fleet with these results, read as the status fact reads it."""
    root = tmp_path / "rocm-fleet"
    for sub in ("apt-hook", "boot-check"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    if verification is not None:
        (root / "last-verify.json").write_text(json.dumps(verification.to_json()))
    if hook is not None:
        at, report = hook
        static = replace(report, request=replace(report.request, static_only=True), document=None)
        (root / "apt-hook" / "last.json").write_text(json.dumps(HookResult(at, static).to_json()))
    if boot is not None:
        at, report = boot
        # As `verify boot-check` writes it (verify/report/boot_state.py), after a reboot from 6.8.0-49.
        result = BootResult("b", "6.8.0-51-generic", at, report, previous_kernel="6.8.0-49-generic")
        (root / "boot-check" / "last.json").write_text(json.dumps(result.to_json()))
    return dict(read_kept_files(str(root)), now=NOW_S, hostname="ws1")


def test_the_row_rests_on_the_verification_as_of_its_age_by_the_hosts_clock(tmp_path):
    answer = keep(tmp_path, verification=report_of("ws1", "pass", at="2026-12-01T17:00:00Z"))
    outcome = outcome_of("ws1", answer)
    assert outcome.state == VERIFIED and outcome.as_of == "2026-12-01 17:00Z (3 h ago)"
    assert outcome.sources == (
        "verification: PASS as of 2026-12-01 17:00Z (3 h ago) — shown",
        "apt hook: none kept",
        "boot check: none kept",
    )
    assert row_for(outcome).verdict == "PASS"


def test_a_newer_apt_hook_result_that_fails_fails_the_host_an_older_one_counts_for_nothing(tmp_path):
    verification = report_of("ws1", "pass", at="2026-12-01T17:00:00Z")
    newer = outcome_of(
        "ws1", keep(tmp_path / "a", verification, hook=("2026-12-01T19:30:00Z", report_of("ws1", "strays")))
    )
    row = row_for(newer)
    assert row.verdict == "FAIL" and row.reason == f"FAIL strays: {STRAY}"
    assert row.lead.sources == ("apt hook, 2026-12-01 19:30Z (30 min ago)",)
    older = outcome_of(
        "ws1", keep(tmp_path / "b", verification, hook=("2026-12-01T16:00:00Z", report_of("ws1", "strays")))
    )
    assert row_for(older).verdict == "PASS" and older.later == ()
    assert "apt hook: FAIL as of 2026-12-01 16:00Z (4 h ago) — older than what is shown: not counted" in older.sources


def test_a_newer_boot_check_is_what_the_row_rests_on(tmp_path):
    answer = keep(
        tmp_path,
        verification=report_of("ws1", "pass", at="2026-11-30T17:00:00Z"),
        boot=("2026-12-01T08:00:00Z", report_of("ws1", "no_rocm", at="2026-12-01T08:00:00Z")),
    )
    outcome = outcome_of("ws1", answer)
    assert outcome.as_of == "2026-12-01 08:00Z (12 h ago)" and row_for(outcome).verdict == "FAIL"
    assert (
        outcome.sources[0] == "verification: PASS as of 2026-11-30 17:00Z (1 d ago) — older than what is shown: "
        "not counted"
    )
    # Which boot it was: the kernel it ran in and the one before (day2's boot result, read by its own reader).
    assert outcome.sources[2] == (
        "boot check in 6.8.0-51-generic (after the reboot from 6.8.0-49-generic): FAIL as of "
        "2026-12-01 08:00Z (12 h ago) — shown"
    )


def test_no_report_kept_is_not_verified_and_an_unusable_file_says_which_and_why(tmp_path):
    nothing = outcome_of("ws2", keep(tmp_path / "a"))
    assert (nothing.state, nothing.detail) == (NOT_VERIFIED, NO_REPORT)
    assert row_for(nothing).verdict == "NOT VERIFIED"
    answer = keep(tmp_path / "b", verification=report_of("ws3", "pass", at="2026-12-01T17:00:00Z"))
    (tmp_path / "b" / "rocm-fleet" / "apt-hook" / "last.json").write_text("{cut off")
    answer = dict(read_kept_files(str(tmp_path / "b" / "rocm-fleet")), now=NOW_S, hostname="ws3")
    row = row_for(outcome_of("ws3", answer))
    assert row.verdict == "NOT VERIFIED"
    assert row.reason.startswith(f"NOT VERIFIED {tmp_path}/b/rocm-fleet/apt-hook/last.json cannot be used (not JSON:")
    assert "apt hook: cannot be used" in row.sources


def test_a_host_that_could_not_answer_is_a_row_saying_so():
    outcome = outcome_of("ws4", {"error": "sh: 1: python3: not found"})
    assert row_for(outcome).reason == "could not read what the host keeps: sh: 1: python3: not found"
    assert row_for(outcome).verdict == "NOT VERIFIED"


def test_ages():
    assert [age(s) for s in (5, 60 * 5, 3600 * 3, 86400 * 2)] == ["5 s ago", "5 min ago", "3 h ago", "2 d ago"]
    assert age(-3600) == "in the future (clock skew?)" and age(-30) == "0 s ago"


def test_a_kept_report_that_proves_nothing_is_not_taken_for_one(tmp_path):
    """The verifier's one rule (judge_report) holds for what a host keeps: another host's report copied here, one that
    answers another question, or one whose verdict its checks do not give, leaves the host NOT VERIFIED, saying so."""
    report = report_of("ws1", "pass", at="2026-12-01T17:00:00Z")
    answer = keep(tmp_path / "a", verification=report)
    copied = row_for(outcome_of("ws1", dict(answer, hostname="ws9")))
    assert copied.verdict == "NOT VERIFIED"
    assert "not proven — the report is from host 'ws1', this host says it is 'ws9'" in copied.reason
    asked = dict(report.to_json()["request"], venv="/srv/other-venv")
    other = row_for(outcome_of("ws1", answer, request=asked))
    assert other.verdict == "NOT VERIFIED" and "the report answers another question: venv" in other.reason
    assert row_for(outcome_of("ws1", answer, request=report.to_json()["request"])).verdict == "PASS"
    lying = dict(report.to_json(), verdict="pass")
    lying["checks"] = [dict(c, status="fail") if c["id"] == "strays" else c for c in lying["checks"]]
    root = tmp_path / "a" / "rocm-fleet"
    (root / "last-verify.json").write_text(json.dumps(lying))
    row = row_for(outcome_of("ws1", dict(read_kept_files(str(root)), now=NOW_S, hostname="ws1")))
    assert row.verdict == "NOT VERIFIED" and "the report's verdict 'pass' is not what its checks give" in row.reason
