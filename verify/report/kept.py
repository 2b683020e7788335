"""The results a workstation keeps, read back typed: what the status task and the metrics file are made of.

Each file that `kept_files.read_kept_files` read is hostile input. `kept_result(source, entry)` turns one into a
`KeptResult` — which source, when it ran, its `Report` (through `Report.from_json`, so only a report of a schema this
checkout reads counts) — or says in one line why it cannot: missing (a normal state, e.g. no boot check on this host)
or unusable (not JSON, not a result, not a report). Two shapes are read:

- a report document itself (`verify check`'s, kept as last-verify.json);
- a result wrapping one: `{"kind": "rocm-fleet.<what>-result", "checked_at": "…", "report": {…}, …}` — the apt
  hook's (hook_state.py) and the boot-time check's. Any kind in WRAPPED is read the same way, so a new source is a
  line in kept_files.KEPT and one here.
"""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import dataclass
from typing import Any, Mapping

from verify.report.kept_files import KEPT
from verify.report.report import KIND as REPORT_KIND
from verify.report.report import Report, ReportError

# What each source's file holds when it is not a bare report: the wrapper's kind.
WRAPPED = {
    "apt_hook": "rocm-fleet.apt-hook-result",
    "boot_check": "rocm-fleet.boot-check-result",
}
LABELS = {"verification": "verification", "apt_hook": "apt hook", "boot_check": "boot check"}
# What replaces a file of each source (said when one cannot be used).
REPLACED_BY = {
    "verification": "pyinfra INVENTORY tasks/verify.py replaces it",
    "apt_hook": "the next dpkg run replaces it",
    "boot_check": "the next boot check replaces it",
}


@dataclass(frozen=True)
class KeptResult:
    source: str  # a key of kept_files.KEPT
    checked_at: str  # "2026-12-01T17:00:00Z", as the host's clock said
    report: Report
    path: str = ""  # where the host keeps it

    @property
    def label(self) -> str:
        return LABELS.get(self.source, self.source)

    @property
    def full(self) -> bool:
        """Every check ran (the runtime and NF4 included); the apt hook's results are static only."""
        return not self.report.request.static_only

    @property
    def timestamp(self) -> float | None:
        return parse_time(self.checked_at)


@dataclass(frozen=True)
class Unusable:
    source: str
    path: str
    why: str  # one line

    @property
    def line(self) -> str:
        fix = REPLACED_BY.get(self.source, "the next run replaces it")
        return f"{self.path} cannot be used ({self.why}): it proves nothing — {fix}"


def parse_time(text: str) -> float | None:
    """Unix time of "YYYY-MM-DDTHH:MM:SSZ" (how reports say when they were made); None for anything else."""
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def kept_result(source: str, entry: Any) -> KeptResult | Unusable | None:
    """One entry of `read_kept_files()["files"]`: its result, why it is unusable, or None when the file is missing."""
    if not isinstance(entry, Mapping):
        return Unusable(source, KEPT.get(source, source), "the host's answer for it is not an object")
    path = str(entry.get("path", KEPT.get(source, source)))
    if entry.get("missing") is True:
        return None
    if "error" in entry:
        return Unusable(source, path, str(entry["error"]))
    text = entry.get("text")
    if not isinstance(text, str):
        return Unusable(source, path, "no contents")
    try:
        document = json.loads(text)
    except ValueError as error:
        return Unusable(source, path, f"not JSON: {error}")
    try:
        return _result(source, document, path)
    except ReportError as error:
        return Unusable(source, path, str(error))


def _result(source: str, document: Any, path: str) -> KeptResult:
    if not isinstance(document, Mapping):
        raise ReportError("not a JSON object")
    if document.get("kind") == REPORT_KIND:
        report = Report.from_json(document)
        return KeptResult(source, report.generated_at, report, path)
    wanted = WRAPPED.get(source)
    if wanted is None or document.get("kind") != wanted:
        raise ReportError(f"kind {document.get('kind')!r} is not a report"
                          + (f" nor a {wanted!r}" if wanted else ""))
    report = Report.from_json(document.get("report"))
    checked_at = document.get("checked_at")
    return KeptResult(source, checked_at if isinstance(checked_at, str) else report.generated_at, report, path)


def kept_results(answer: Any) -> tuple[dict[str, KeptResult], list[Unusable], float | None]:
    """Every source of one host's `read_kept_files()` answer: (results by source, unusable files, the host's time)."""
    files = answer.get("files") if isinstance(answer, Mapping) else None
    if not isinstance(files, Mapping):
        return {}, [Unusable("status", "the host's answer", "it is not what kept_files.py prints")], None
    results, unusable = {}, []
    for source in KEPT:
        found = kept_result(source, files.get(source, {"missing": True}))
        if isinstance(found, KeptResult):
            results[source] = found
        elif isinstance(found, Unusable):
            unusable.append(found)
    now = answer.get("now")
    return results, unusable, float(now) if isinstance(now, (int, float)) and not isinstance(now, bool) else None
