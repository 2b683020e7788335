"""roles/verification/reports.py, keeping and drift: the controller keeps each host's last passing report beside
reports/<host>.json and states the drift of every new report from it — in the run's output and in the fleet summary.

The reports are the real verifier's on stand-in workstation images (tests/support/drift_images.py: gcc-built
STAND-INS for the torch ROCm wheel and ROCm 7.2.4; real Debian 12 dpkg data for the distro packages), saved the way
the verification stage saves them (`save_report`). Reading and judging a run's output: test_reports.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from roles.verification.host_row import VERIFIED, HostOutcome
from roles.verification.reports import (
    baseline,
    compare_and_keep,
    drift_lines,
    last_pass_path,
    report_filename,
    save_report,
)
from roles.verification.summary import render_html, render_markdown
from tests.support.drift_images import Workstation, verify_report
from tests.support.report_samples import sample
from verify.report.report import Report

RSMI = (
    "DRIFT worse since {baseline}: librocm_smi64.so.1 now resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 "
    "from librocm-smi64-1 5.2.3-2 (distro) instead of /opt/rocm-7.2.4/lib"
)
NEW_STRAY = (
    "DRIFT worse since {baseline}: new stray package: librocm-smi64-1 5.2.3-2 (pulled in by "
    "slurm-wlm-rsmi-plugin, slurm-wlm-rsmi-plugin-dev; ships librocm_smi64.so.1, which a ROCm 7.2 consumer "
    "could bind to)"
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Report]:
    ws = Workstation.provisioned(tmp_path_factory.mktemp("history") / "ws")
    found = {"passing": verify_report(ws.root)}
    ws.distro_rocm_smi()
    found["rsmi"] = verify_report(ws.root)
    ws.restore_rocm_smi()
    found["passing_again"] = verify_report(ws.root)
    assert [found[k].verdict for k in ("passing", "rsmi", "passing_again")] == ["warn", "fail", "warn"]
    return found


def arrive(reports_dir, report):
    """What the verification stage does with a host's new report: the drift first, then the save."""
    drift = compare_and_keep(reports_dir, "ws1", report, passed=report.passed)
    save_report(reports_dir, "ws1", report)
    return drift


def test_drift_is_stated_from_the_last_passing_report_until_the_host_passes_again(reports, tmp_path):
    assert arrive(tmp_path, reports["passing"]) is None  # a host's first report has nothing to compare with
    assert json.loads(last_pass_path(tmp_path, "ws1").read_text()) == reports["passing"].to_json()

    label = f"the last passing report ({reports['passing'].generated_at})"
    drift = arrive(tmp_path, reports["rsmi"])
    assert drift.baseline == label and drift.got_worse
    lines = drift_lines(drift)
    assert lines[0] == RSMI.format(baseline=label) and NEW_STRAY.format(baseline=label) in lines and len(lines) == 8
    # Still failing on the next run: the drift is still stated against the last passing report, not the last one.
    assert drift_lines(arrive(tmp_path, reports["rsmi"])) == lines
    assert json.loads(last_pass_path(tmp_path, "ws1").read_text()) == reports["passing"].to_json()

    back = arrive(tmp_path, reports["passing_again"])
    assert back.changes == ()
    assert json.loads(last_pass_path(tmp_path, "ws1").read_text()) == reports["passing_again"].to_json()


def test_a_host_that_never_passed_is_compared_with_its_previous_report(reports, tmp_path):
    arrive(tmp_path, reports["rsmi"])
    assert not last_pass_path(tmp_path, "ws1").exists()
    drift = arrive(tmp_path, reports["passing"])
    assert drift.baseline == f"the previous report ({reports['rsmi'].generated_at})"
    assert drift_lines(drift)[0].startswith(
        f"DRIFT better since {drift.baseline}: librocm_smi64.so.1 now resolves to "
        "/opt/rocm-7.2.4/lib/librocm_smi64.so.1"
    )


def test_an_unreadable_last_passing_report_is_logged_and_skipped(reports, tmp_path, caplog):
    arrive(tmp_path, reports["rsmi"])
    last_pass_path(tmp_path, "ws1").parent.mkdir()
    last_pass_path(tmp_path, "ws1").write_text("{cut off")
    with caplog.at_level(logging.WARNING, logger="pyinfra.rocm_fleet.reports"):
        found = baseline(tmp_path, "ws1")
    assert found[1].startswith("the previous report")
    assert f"{last_pass_path(tmp_path, 'ws1')} is not a readable report" in caplog.text


def test_the_fleet_summary_lists_the_drift_under_the_hosts_finding(reports, tmp_path):
    arrive(tmp_path, reports["passing"])
    lines = drift_lines(arrive(tmp_path, reports["rsmi"]))
    outcome = HostOutcome("ws1", VERIFIED, reports["rsmi"], drift=lines)
    markdown = render_markdown([outcome], title="t", generated_at="now")
    section = markdown.split("## Findings", 1)[1].split("## Checks", 1)[0]
    assert f"  - 1 host ws1: {lines[0]}" in section.replace("\\|", "|")
    assert all(line in section for line in lines)
    assert "new stray package: librocm-smi64-1 5.2.3-2" in render_html([outcome], title="t", generated_at="now")


def test_a_baseline_of_another_shape_is_logged_and_gives_no_drift(reports, tmp_path, caplog):
    last_pass_path(tmp_path, "ws1").parent.mkdir()
    odd = json.loads(json.dumps(reports["passing"].to_json()))
    [strays] = [check for check in odd["checks"] if check["id"] == "strays"]
    strays["evidence"] = {"schema": "verify.strays/1", "strays": [{"architecture": "amd64"}]}  # schema-valid, odd
    last_pass_path(tmp_path, "ws1").write_text(json.dumps(odd))
    with caplog.at_level(logging.WARNING, logger="pyinfra.rocm_fleet.reports"):
        assert compare_and_keep(tmp_path, "ws1", reports["rsmi"], passed=False) is None
    assert "ws1: no drift from the last passing report" in caplog.text


def test_a_last_passing_report_edited_since_is_no_baseline(reports, tmp_path, caplog):
    """reports/last-pass/<host>.json is kept only while verify/report/report.py's rule still passes it: a report turned
    into a 'pass' by hand (its failing linkage check still in it) is skipped, and the drift is stated from the previous
    one."""
    arrive(tmp_path, reports["passing"])
    arrive(tmp_path, reports["rsmi"])
    last_pass_path(tmp_path, "ws1").write_text(json.dumps(dict(reports["rsmi"].to_json(), verdict="pass")))
    with caplog.at_level(logging.WARNING, logger="pyinfra.rocm_fleet.reports"):
        found = baseline(tmp_path, "ws1")
    assert found[1].startswith("the previous report")
    assert "no longer proves a pass (the report's verdict 'pass' is not what its checks give" in caplog.text


def test_a_report_the_rule_fails_is_never_kept_as_the_last_passing_one(reports, tmp_path):
    forged = Report.from_json(dict(reports["rsmi"].to_json(), verdict="warn"))
    compare_and_keep(tmp_path, "ws1", forged, passed=True)
    assert not last_pass_path(tmp_path, "ws1").exists()


def test_reports_are_written_whole_under_a_safe_name(tmp_path: Path):
    assert report_filename("@chroot/srv/ws1") == "@chroot_srv_ws1.json"
    assert report_filename("ws1.lab") == "ws1.lab.json"
    report = sample()
    saved = save_report(tmp_path / "reports", "@chroot/srv/ws1", report)
    assert saved == tmp_path / "reports" / "@chroot_srv_ws1.json"
    assert json.loads(saved.read_text()) == report.to_json()
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no partial file left behind
