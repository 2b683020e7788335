"""verify/report/hook_state.py: the apt hook's last result and last passing one, and what happens to a file that is
not one."""

from __future__ import annotations

import json

import pytest

from tests.support.report_samples import edited, sample
from verify.report.hook_state import KIND, HookResult, HookState, StateError
from verify.report.report import Report, ReportError


def report(verdict: str):
    """A static-only report (what the hook checks) with this verdict."""
    return sample(
        {"pass": {}, "warn": {"strays": "warn"}, "fail": {"linkage.static": "fail"}}[verdict], static_only=True
    )


def test_a_passing_result_is_kept_as_last_and_as_last_passing(tmp_path):
    state = HookState(tmp_path / "state")
    state.record(HookResult("t1", report("warn")))
    assert state.last() == state.last_pass() == HookResult("t1", report("warn"))


def test_a_failing_result_leaves_the_last_passing_one_alone(tmp_path):
    state = HookState(tmp_path)
    state.record(HookResult("t1", report("pass")))
    state.record(HookResult("t2", report("fail"), drift={"changes": []}))
    assert state.last().checked_at == "t2" and state.last().drift == {"changes": []}
    assert state.last_pass().checked_at == "t1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last-pass.json", "last.json"]  # no partial files left


def test_nothing_recorded_yet(tmp_path):
    assert HookState(tmp_path / "none").last() is None


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not JSON"),
        (json.dumps({"kind": "something else"}), "is not an apt hook result"),
        (
            json.dumps({"kind": KIND, "version": 99, "report": report("pass").to_json()}),
            "has format version 99, this verifier reads 1",
        ),
        (json.dumps({"kind": KIND, "version": 1, "report": {"verdict": "pass"}}), "holds no report"),
    ],
)
def test_a_file_that_is_not_a_result_is_one_line_naming_it(tmp_path, content, message):
    (tmp_path / "last.json").write_text(content)
    with pytest.raises(StateError) as raised:
        HookState(tmp_path).last()
    assert str(raised.value).startswith(str(tmp_path / "last.json")) and message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(verdict="pass"),  # a failing check under a passing verdict
        lambda r: r.update(checks=[c for c in r["checks"] if c["status"] != "fail"]),  # the failing check cut out
    ],
)
def test_a_report_that_does_not_prove_a_pass_never_becomes_the_last_passing_one(tmp_path, change):
    state = HookState(tmp_path)
    state.record(HookResult("t1", report("warn")))
    state.record(HookResult("t2", Report.from_json(edited(report("fail").to_json(), change))))
    assert state.last().checked_at == "t2" and state.last_pass().checked_at == "t1"
    # (a report without a verdict cannot even be read as one: Report.from_json refuses it)
    with pytest.raises(ReportError):
        Report.from_json(edited(report("fail").to_json(), lambda r: r.pop("verdict")))
