"""One host's report on the controller: reading what `verify check --json` printed on the host, judging it, keeping it
as reports/<host>.json, and the drift of every new report from the host's baseline.

Reading. The remote command prints three things on stdout, in this order: a marker line with the host's own name
(`rocm-fleet-verify-host=NAME`, from `uname -n`), the verifier's JSON report, and a marker line with the verifier's exit
status (`rocm-fleet-verify-exit=N`) — so the shell step itself always succeeds and the judging happens here, with the
report in hand. `collect_report` is the verification stage's step that does it all, on the controller, as each host's
run ends: read, judge, keep, state the drift, record the host in the fleet summary (fleet.py).

Judging. A host passes only on a report that proves it (verify/report/report.py `judge_report`, the one rule): exactly
that output, one JSON document (no duplicate keys, no NaN), schema-valid, verdict pass or warn with no failing check and
the verdict its checks give, the question asked of this host answered (`request`), the host's own name in it, and exit
status 0. A trustworthy report with verdict fail fails the host with the report's reason; anything else fails it with
one line saying what was wrong and what to do.

Keeping, and the drift. The controller's memory of each host's reports:

    reports/<host>.json              the latest report (`save_report`, written whole)
    reports/last-pass/<host>.json    the host's last report that proved a pass (kept here)

When a host's new report arrives — before it replaces reports/<host>.json — `compare_and_keep` states the drift
(verify/report/drift.py) from the host's baseline: its last passing report when it has one, otherwise the report being
replaced, so that a host that never passed (the local test fleet: no ROCm, a CPU torch) still shows what changed since
the previous run. A host's first report has no baseline. A new report that proved a pass (the verification stage
judged it with verify/report/report.py's rule, exit status and all) becomes the last passing one; a kept last-pass
file is a baseline only while the same rule still passes it (a file edited or damaged since is not).

A baseline that cannot be read or compared is not an error of the run: it is logged, the drift then says nothing,
and the next passing report replaces the file.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyinfra import logger

from roles.verification.fleet import fleet_summary, write_file
from verify.report import host_input
from verify.report.drift import Drift, compare_reports
from verify.report.report import RERUN_FIX, Report, ReportError, judge_report

log = logging.getLogger("pyinfra.rocm_fleet.reports")  # pyinfra's CLI prints the "pyinfra" logger tree

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


def collect_report(state, host, run, reports_dir: str, torch_label: str | None, request: dict) -> bool:
    """The verification stage's last step, at execution (pyinfra's python.call): judge the verifier's output `run`,
    save a trustworthy report with its drift, record the host in the fleet summary, fail the host with one line unless
    the report proves it passed."""
    summary = fleet_summary(state, Path(reports_dir))
    outcome = parse_check_output(run.stdout, run.stderr, request=request)
    saved = None
    if outcome.report is not None:
        # before the save
        drift = drift_lines(compare_and_keep(Path(reports_dir), host.name, outcome.report, passed=outcome.passed))
        saved = save_report(Path(reports_dir), host.name, outcome.report)
        summary.record_report(host.name, outcome.report, torch_label, drift=drift)
        for line in drift:
            host.log_styled(line, fg="yellow", log_func=logger.warning)
    else:
        summary.record_no_report(host.name, f"verification {outcome.error}", torch_label)
    if outcome.failed:
        host.log_styled(failure_line(host.name, outcome, saved), fg="red", log_func=logger.error)
        return False
    verdict = outcome.report.verdict
    host.log_styled(
        f"verification {verdict}: {outcome.report.reason} (report: {saved})",
        fg="green" if verdict == "pass" else "yellow",
        log_func=logger.info,
    )
    return True


# --- reading and judging ----------------------------------------------------------------------------------------------


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


# --- keeping, and the drift -------------------------------------------------------------------------------------------

LAST_PASS_DIR = "last-pass"


def report_filename(host_name: str) -> str:
    """A host name as a file name: inventory names may hold '/' or ':' (e.g. '@chroot/srv/ws1', 'ssh://…')."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", host_name).strip("_") + ".json"


def save_report(reports_dir: Path, host_name: str, report: Report) -> Path:
    """Write reports_dir/<host>.json atomically (a reader never sees half a report)."""
    target = reports_dir / report_filename(host_name)
    write_file(target, json.dumps(report.to_json(), indent=1) + "\n")
    return target


def last_pass_path(reports_dir: Path, host_name: str) -> Path:
    return reports_dir / LAST_PASS_DIR / report_filename(host_name)


def _read(path: Path) -> Report | None:
    try:
        return Report.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # ReportError is a ValueError
        log.warning("%s is not a readable report (%s): no drift from it", path, error)
        return None


def baseline(reports_dir: Path, host_name: str) -> tuple[Report, str] | None:
    """(report, how to name it) the host's next report is compared with, or None for a host with no report yet."""
    last_pass = _read(last_pass_path(reports_dir, host_name))
    if last_pass is not None and not last_pass.passed:
        log.warning(
            "%s no longer proves a pass (%s): no drift from it",
            last_pass_path(reports_dir, host_name),
            last_pass.judge().problem or "its verdict is fail",
        )
        last_pass = None
    if last_pass is not None:
        return last_pass, f"the last passing report ({last_pass.generated_at})"
    previous = _read(reports_dir / report_filename(host_name))
    if previous is not None:
        return previous, f"the previous report ({previous.generated_at})"
    return None


def compare_and_keep(reports_dir: Path, host_name: str, report: Report, *, passed: bool) -> Drift | None:
    """The drift of `report` from the host's baseline; keeps `report` as the last passing one when it `passed`
    (verify/report/report.py's judgement of this run, which knows the exit status; this module does not).
    Call it before reports/<host>.json is replaced by `report`."""
    found = baseline(reports_dir, host_name)
    drift = None
    if found is not None:
        try:
            drift = compare_reports(found[0], report, baseline_label=found[1])
        except (ReportError, KeyError, TypeError, AttributeError) as error:  # an older verifier's, or hand-edited
            log.warning(
                "%s: no drift from %s, it is not shaped like a report of this verifier (%r)", host_name, found[1], error
            )
    if passed and report.passed:  # the caller's judgement, and never a report the rule fails
        save_report(reports_dir / LAST_PASS_DIR, host_name, report)  # = last_pass_path(), written atomically
    return drift


def drift_lines(drift: Drift | None) -> tuple[str, ...]:
    """What the summary and the run's output show: one line per change, worse first, e.g. "DRIFT worse since the
    last passing report (2026-11-29T18:40:02Z): new stray package: libamdhip64-5 5.7.1-6+deb13u1 (pulled in by
    libucx0)"."""
    if drift is None:
        return ()
    return tuple(f"DRIFT {change.direction} since {drift.baseline}: {change.text}" for change in drift.ordered())
