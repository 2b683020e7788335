"""roles/verification/reports.py: judging the verifier's output on the controller, saving reports/<host>.json.

The real verifier's reports where a run can make them; for what no real run produces (a damaged or hand-edited
report, a verdict contradicting its checks, output that is not the verifier's) reports built the way the verifier
builds them (tests/support/report_samples.py), then broken one way each.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from roles.verification.reports import (
    EXIT_MARKER,
    HOST_MARKER,
    failure_line,
    parse_check_output,
)
from tests.support.report_samples import REQUEST, edited, output, sample_report
from tests.support.verify_runs import cached_check, torch_cpu_venv

PASSING = sample_report()
WARNING = sample_report({"strays": "warn", "runtime.maps": "skip"})
FAILING = sample_report({"linkage.static": "fail"})


def _drop_failing_checks(report):
    report["checks"] = [c for c in report["checks"] if c["status"] != "fail"]
    report["verdict"] = "pass"


@pytest.mark.slow
def test_a_real_report_with_the_markers_is_read_back_whole():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    asked = dict(REQUEST, venv=str(torch_cpu_venv()), device="cpu")
    stdout = f"{HOST_MARKER}{socket.gethostname()}\n{done.stdout}\n{EXIT_MARKER}{done.returncode}\n"
    run = parse_check_output(stdout, done.stderr, request=asked)
    assert run.exit_code == 1 and run.error is None
    assert run.report.to_json() == report and run.failed
    line = failure_line("ws1", run, Path("reports/ws1.json"))
    assert line.startswith("ws1: verification failed — linkage.static: libhipblas.so.3 (needed by")
    assert line.endswith("(report: reports/ws1.json)") and "\n" not in line
    # The same real report, but from another host or for another venv, proves nothing.
    assert "from host" in parse_check_output(stdout.replace(socket.gethostname(), "ws9", 1), request=asked).error
    assert "answers another question" in parse_check_output(stdout, request=dict(asked, venv="/srv/v")).error


def test_a_usage_error_has_no_report_and_keeps_the_verifiers_line():
    run = parse_check_output(
        output(None, 2, text=""), "verify check: /opt/rocm-fleet/venv: not a venv (no pyvenv.cfg) — …"
    )
    assert run.report is None and run.exit_code == 2 and run.failed
    assert run.error == (
        "did not run — the verifier printed no report (exit status 2): verify check: "
        "/opt/rocm-fleet/venv: not a venv (no pyvenv.cfg) — …"
    )
    assert failure_line("ws1", run, None).startswith("ws1: verification did not run — the verifier printed no report")
    assert parse_check_output("", "ssh: connection reset").error.startswith(
        "did not run — the host printed nothing: ssh: connection reset — run tasks/verify.py again"
    )


@pytest.mark.parametrize("report, exit_status, passed", [(PASSING, 0, True), (WARNING, 0, True), (FAILING, 1, False)])
def test_a_report_that_proves_its_verdict_is_kept(report, exit_status, passed):
    run = parse_check_output(output(report, exit_status), request=REQUEST)
    assert run.error is None and run.report.to_json() == report and run.passed is passed


# Each of these passed the host on the code before this rule (it failed a host only on verdict == "fail"), except
# "an extra host marker" (a line after the JSON: not JSON to the old parser) and those under "Already failed closed
# before" (kept so they stay so).
NOT_PROVEN = {
    "no verdict, exit 1": (output(edited(FAILING, lambda r: r.pop("verdict")), 1), "'verdict' is missing"),
    "verdict FAIL in capitals": (
        output(edited(FAILING, lambda r: r.update(verdict="FAIL")), 1),
        "verdict: 'FAIL' is not one of",
    ),
    "pass with a failing check": (
        output(edited(FAILING, lambda r: r.update(verdict="pass")), 0),
        "verdict 'pass' is not what its checks give ('fail': check linkage.static is fail)",
    ),
    "pass, exit 1": (output(PASSING, 1), "the verifier exited 1, but a 'pass' report means exit 0"),
    "warn, exit 1": (output(WARNING, 1), "the verifier exited 1, but a 'warn' report means exit 0"),
    "verdict skip": (output(edited(PASSING, lambda r: r.update(verdict="skip")), 0), "verdict 'skip' is not what"),
    "the failing checks cut out": (
        output(edited(FAILING, _drop_failing_checks), 0),
        "lacks check(s) linkage.static that the verifier always runs",
    ),
    "a skipped linkage check": (
        output(sample_report({"linkage.static": "skip"}), 0),
        "passes with check(s) linkage.static skipped",
    ),
    "no NF4 run": (output(sample_report({"nf4.cuda0": None}), 0), "lacks check(s) nf4"),
    "a check listed twice": (
        output(edited(PASSING, lambda r: r["checks"].append(r["checks"][0])), 0),
        "lists check(s) linkage.static more than once",
    ),
    "exit status never came": (output(PASSING, None), "does not end with its exit status"),
    "two exit markers": (
        output(PASSING, 0).replace(HOST_MARKER, f"{EXIT_MARKER}1\n{HOST_MARKER}"),
        "does not start with the host's name marker",
    ),
    "an extra exit marker inside": (
        output(PASSING, 0).replace("\n", f"\n{EXIT_MARKER}0\n", 1),
        "3 marker lines, not 2",
    ),
    "an extra host marker": (
        output(PASSING, 0).replace(EXIT_MARKER, f"{HOST_MARKER}ws1\n{EXIT_MARKER}"),
        "3 marker lines, not 2",
    ),
    "text before the report": (
        output(PASSING, 0, text="Welcome!\n" + json.dumps(PASSING)),
        "printed something else before its report",
    ),
    "a duplicate key": (
        output(None, 0, text=json.dumps(FAILING)[:-1] + ', "verdict": "pass"}'),
        "key 'verdict' appears twice",
    ),
    "NaN in the report": (
        output(
            None,
            0,
            text=json.dumps(
                edited(
                    PASSING,
                    lambda r: r["facts"].update(
                        nf4=[{"device": "cpu", "status": "pass", "roundtrip_mean_abs_error": float("nan")}]
                    ),
                )
            ),
        ),
        "NaN is not JSON",
    ),
    "another host's report": (output(PASSING, 0, hostname="ws2"), "from host 'ws1', this host says it is 'ws2'"),
    "another venv's report": (
        output(edited(PASSING, lambda r: r["request"].update(venv="/home/alice/venv")), 0),
        "answers another question: venv '/home/alice/venv' (asked '/opt/rocm-fleet/venv')",
    ),
    "a static-only report": (output(sample_report(static_only=True), 0), "static_only True (asked False)"),
    "a report with an extra key": (output(edited(PASSING, lambda r: r.update(passed=True)), 0), "unexpected 'passed'"),
    # Already failed closed before:
    "truncated JSON": (output(None, 0, text=json.dumps(PASSING)[:-200]), "is not one JSON report"),
    "two reports": (
        output(None, 0, text=json.dumps(FAILING) + "\n" + json.dumps(PASSING)),
        "not one JSON report (Extra data",
    ),
    "another kind": (
        output(edited(PASSING, lambda r: r.update(kind="rocm-fleet.apt-hook-result")), 0),
        "kind: 'rocm-fleet.apt-hook-result' is not 'rocm-fleet.verify-report'",
    ),
    "a newer schema": (output(edited(PASSING, lambda r: r.update(schema_version=4)), 0), "schema_version: 4 is not 3"),
    "a report without the probe account": (
        output(edited(PASSING, lambda r: r["facts"].pop("probe_account")), 0),
        "facts: 'probe_account' is missing",
    ),
}


@pytest.mark.parametrize("case", NOT_PROVEN)
def test_output_that_proves_no_pass_fails_the_host_with_one_line(case):
    stdout, words = NOT_PROVEN[case]
    run = parse_check_output(stdout, request=REQUEST)
    assert run.failed and not run.passed
    line = failure_line("ws2", run, None)
    assert line.startswith("ws2: verification not proven — ") and words in line, line
    assert line.endswith(
        "run tasks/verify.py again from this checkout (it uploads this checkout's verifier); if it "
        "happens again, the verifier on the host is damaged or not this checkout's"
    )
    assert "\n" not in line
