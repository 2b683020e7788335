"""Reading what `verify check --json` printed on a host, judging it, and keeping it on the controller as
reports/<host>.json.

Pure (roles/verification/report_history.py keeps what it accepts). The remote command prints three things on stdout, in
this order: a marker line with the host's own name (`rocm-fleet-verify-host=NAME`, from `uname -n`), the verifier's JSON
report, and a marker line with the verifier's exit status (`rocm-fleet-verify-exit=N`) — so the shell step itself always
succeeds and the judging happens here, with the report in hand.

A host passes only on a report that proves it (verify/report/report.py `judge_report`, the one rule): exactly that
output, one JSON document (no duplicate keys, no NaN), schema-valid, verdict pass or warn with no failing check and the
verdict its checks give, the question asked of this host answered (`request`), the host's own name in it, and exit
status 0. A trustworthy report with verdict fail fails the host with the report's reason; anything else fails it with
one line saying what was wrong and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.report import host_input
from verify.report.report import RERUN_FIX, Report, ReportError, judge_report

EXIT_MARKER = "rocm-fleet-verify-exit="
HOST_MARKER = "rocm-fleet-verify-host="
_EXIT_LINE = re.compile(rf"{re.escape(EXIT_MARKER)}(\d{{1,3}})")
_HOST_LINE = re.compile(rf"{re.escape(HOST_MARKER)}(\S+)")
_MARKERS = (EXIT_MARKER, HOST_MARKER)
DID_NOT_RUN, NOT_PROVEN = "did not run", "not proven"


@dataclass(frozen=True)
class CheckRun:
    """One host's verifier run as the controller sees it."""

    exit_code: int | None  # None: the marker line never came (the shell or SSH died first)
    report: Report | None  # only a trustworthy report (verify.report.report.Judgement.trustworthy)
    error: str | None  # no report: one line, "did not run — …" or "not proven — what was wrong — the fix"
    passed: bool = False  # the report proves the host passed

    @property
    def failed(self) -> bool:
        return not self.passed


def loads_report(text: str) -> Any:
    """One strict JSON document, its text inert (verify/report/host_input.py); ValueError with one line."""
    return host_input.loads(text)


def parse_check_output(stdout: str, stderr: str = "", *, request: Mapping[str, Any] | None = None) -> CheckRun:
    """Judge one run's output; `request`: what was asked of the host (`verify check`'s arguments, as the report's
    "request" states them), None to leave that unchecked (tests of the parsing alone)."""
    lines = [line.strip() for line in stdout.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    exits = [m for m in map(_EXIT_LINE.fullmatch, lines) if m]
    exit_code = int(exits[-1].group(1)) if exits else None
    last_error = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), None)
    # JSON never starts a line with a marker (strings are quoted, newlines in them escaped): any such line is one.
    marker_lines = [line for line in lines if line.startswith(_MARKERS)]

    def refused(problem: str, fix: str = RERUN_FIX) -> CheckRun:
        return CheckRun(exit_code, None, f"{NOT_PROVEN} — {problem} — {fix}")

    def did_not_run(problem: str) -> CheckRun:
        return CheckRun(exit_code, None, f"{DID_NOT_RUN} — {problem}")

    if not any(lines):
        return did_not_run(f"the host printed nothing: {last_error or 'no output'} — {RERUN_FIX}")
    host_match = _HOST_LINE.fullmatch(lines[0])
    if host_match is None:
        return refused("the output does not start with the host's name marker (something else ran, or wrote first)")
    if not exits or not _EXIT_LINE.fullmatch(lines[-1]):
        if not any(lines[1:]):
            return did_not_run(
                f"the verifier printed nothing and no exit status came back: {last_error or 'no output'} — {RERUN_FIX}"
            )
        return refused(
            "the verifier's output does not end with its exit status (it or the connection died before the end)"
        )
    if len(marker_lines) != 2:
        return refused(
            f"the output has {len(marker_lines)} marker lines, not 2 (one host name, one exit status): "
            "something besides the verifier wrote them"
        )
    text = "\n".join(lines[1:-1]).strip()
    if not text:
        # 2 is bad usage (e.g. no venv): the verifier's own line on stderr says what to fix.
        return did_not_run(f"the verifier printed no report (exit status {exit_code}): {last_error or 'no output'}")
    if not text.startswith("{"):
        return refused("the verifier printed something else before its report")
    try:
        report = loads_report(text)
    except ValueError as error:
        return refused(f"the verifier's output is not one JSON report ({error})")
    judged = judge_report(report, exit_status=exit_code, hostname=host_match.group(1), request=request)
    if not judged.trustworthy:
        return refused(judged.problem, judged.fix)
    try:
        typed = Report.from_json(report)
    except ReportError as error:  # schema-valid, so not expected: still no pass on it
        return refused(f"the verifier's report cannot be read ({error})")
    return CheckRun(exit_code, typed, None, passed=judged.passed)


def failure_line(host_name: str, run: CheckRun, saved: Path | None) -> str:
    """The one line a failed host is failed with."""
    if run.report is None:
        return f"{host_name}: verification {run.error}"
    where = f" (report: {saved})" if saved else ""
    return f"{host_name}: verification failed — {run.report.reason}{where}"
