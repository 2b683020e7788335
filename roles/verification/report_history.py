"""The controller's memory of each host's reports, and the drift of every new report from it.

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
import os
import re
from pathlib import Path

from verify.report.drift import Drift, compare_reports
from verify.report.report import Report, ReportError

log = logging.getLogger("pyinfra.rocm_fleet.report_history")  # pyinfra's CLI prints the "pyinfra" logger tree

LAST_PASS_DIR = "last-pass"


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
