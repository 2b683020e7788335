"""Reading what `verify check --json` printed on a host, and keeping it on the controller as reports/<host>.json.

Pure except `save_report` (one atomic file write). The remote command ends with a marker line carrying the verifier's
exit status (`rocm-fleet-verify-exit=N`), so the shell step itself always succeeds and the judging happens here,
with the report in hand: 0/1 come with a report, 2 (bad usage, e.g. no venv) and anything else with stderr only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from verify.api import Report, ReportError

EXIT_MARKER = "rocm-fleet-verify-exit="


@dataclass(frozen=True)
class CheckRun:
    """One host's verifier run as the controller sees it."""

    exit_code: int | None  # None: the marker line never came (the shell or SSH died first)
    report: Report | None
    error: str | None  # one line when there is no usable report

    @property
    def failed(self) -> bool:
        return self.report is None or self.report.failed


def parse_check_output(stdout: str, stderr: str = "") -> CheckRun:
    """Split the JSON report from the marker line and check it is a report this controller understands."""
    lines = stdout.splitlines()
    exit_code = None
    body: list[str] = []
    for line in lines:
        match = re.fullmatch(rf"\s*{re.escape(EXIT_MARKER)}(\d+)\s*", line)
        if match:
            exit_code = int(match.group(1))
        else:
            body.append(line)
    last_error = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), None)
    text = "\n".join(body).strip()
    if not text:
        why = last_error or "no output"
        status = f"exit status {exit_code}" if exit_code is not None else "no exit status"
        return CheckRun(exit_code, None, f"the verifier printed no report ({status}): {why}")
    start = text.find("{")
    try:
        document = json.loads(text[start:]) if start >= 0 else None
    except ValueError as error:
        return CheckRun(exit_code, None, f"the verifier's output is not JSON ({error.msg} at line {error.lineno})")
    try:
        return CheckRun(exit_code, Report.from_json(document), None)
    except ReportError as error:
        return CheckRun(exit_code, None, f"the verifier's report is not usable: {error}")


def report_filename(host_name: str) -> str:
    """A host name as a file name: inventory names may hold '/' or ':' (e.g. '@chroot/srv/ws1', 'ssh://…')."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", host_name).strip("_") + ".json"


def save_report(reports_dir: Path, host_name: str, report: Report) -> Path:
    """Write reports_dir/<host>.json atomically (a reader never sees half a report)."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    target = reports_dir / report_filename(host_name)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(partial, target)
    return target


def failure_line(host_name: str, run: CheckRun, saved: Path | None) -> str:
    """The one line a failed host is failed with."""
    if run.report is None:
        return f"{host_name}: verification did not run — {run.error}"
    where = f" (report: {saved})" if saved else ""
    return f"{host_name}: verification failed — {run.report.reason}{where}"
