"""roles/verification/reports.py: reading the verifier's output on the controller, saving reports/<host>.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roles.verification.reports import EXIT_MARKER, failure_line, parse_check_output, report_filename, save_report
from tests.support.reports import built_report
from tests.support.verify_runs import cached_check, torch_cpu_venv


@pytest.mark.slow
def test_a_real_report_with_the_exit_marker_is_read_back_whole():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    run = parse_check_output(done.stdout + f"\n{EXIT_MARKER}{done.returncode}\n", done.stderr)
    assert run.exit_code == 1 and run.error is None
    assert run.report.to_json() == report and run.failed
    line = failure_line("ws1", run, Path("reports/ws1.json"))
    assert line.startswith("ws1: verification failed — linkage.static: libhipblas.so.3 (needed by")
    assert line.endswith("(report: reports/ws1.json)") and "\n" not in line


def test_a_usage_error_has_no_report_and_keeps_the_verifiers_line():
    run = parse_check_output(f"{EXIT_MARKER}2", "verify check: /opt/rocm-fleet/venv: not a venv (no pyvenv.cfg) — …")
    assert run.report is None and run.exit_code == 2 and run.failed
    assert run.error == ("the verifier printed no report (exit status 2): verify check: /opt/rocm-fleet/venv: not a "
                         "venv (no pyvenv.cfg) — …")
    assert failure_line("ws1", run, None).startswith("ws1: verification did not run — the verifier printed no report")


def test_output_that_is_not_a_report_this_controller_reads():
    assert "not JSON" in parse_check_output("{broken\n" + f"{EXIT_MARKER}1").error
    assert "not a rocm-fleet report" in parse_check_output('{"kind": "other"}').error
    newer = json.dumps({"kind": "rocm-fleet.verify-report", "schema_version": 3})
    assert "update the checkout" in parse_check_output(newer).error
    assert parse_check_output("", "").exit_code is None


def test_reports_are_written_whole_under_a_safe_name(tmp_path: Path):
    assert report_filename("@chroot/srv/ws1") == "@chroot_srv_ws1.json"
    assert report_filename("ws1.lab") == "ws1.lab.json"
    report = built_report()
    saved = save_report(tmp_path / "reports", "@chroot/srv/ws1", report)
    assert saved == tmp_path / "reports" / "@chroot_srv_ws1.json"
    assert json.loads(saved.read_text()) == report.to_json()
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no partial file left behind
