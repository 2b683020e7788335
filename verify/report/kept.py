"""The results a workstation keeps, read back typed: what the status task and the metrics file are made of.

Each file that `kept_files.read_kept_files` read is hostile input. `kept_result(source, entry)` turns one into a
`KeptResult` — which source, when it ran, its `Report` — or says in one line why it cannot: missing (a normal state,
e.g. no boot check on this host) or unusable (not JSON, not a result, not a report of a schema this checkout reads).
Each source is read by the reader of the module that writes it, so there is one format and one reader per file:

- the verification's report (last-verify.json, `verify check --keep-in`): `Report.from_json`;
- the apt hook's result (apt-hook/last.json): `HookResult.from_json` (verify/report/hook_state.py);
- the boot-time check's result (boot-check/last.json): `BootResult.from_json` (verify/report/boot_state.py), which
  also says which kernel the check ran in and which one ran before (`KeptResult.boot`).

A new source is a line in kept_files.KEPT and a reader in READERS.

`host_now(answer)` reads what the host says about itself beside its results (`verify kept`): the running boot's id
and the changes dpkg logged lately (verify/debian/dpkg_log.py), as typed, inert values — what the status task needs to
say what a result cannot see (roles/status/model.py).
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verify.report import host_input
from verify.report.boot_state import BootResult
from verify.report.hook_state import HookResult, StateError
from verify.report.kept_files import KEPT
from verify.report.report import KIND as REPORT_KIND
from verify.report.report import BootCheckFacts, Report, ReportError

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
    boot: BootCheckFacts | None = None  # the boot check's: the boot and kernel it ran in, and the kernel before

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

    @property
    def boot_id(self) -> str | None:
        """The boot it ran in: the boot check's own record, else the report's (None in reports made before)."""
        return self.boot.boot_id if self.boot is not None else self.report.host.boot_id


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
    path = host_input.inert(str(entry.get("path", KEPT.get(source, source))))
    if entry.get("missing") is True:
        return None
    if "error" in entry:
        return Unusable(source, path, host_input.inert(str(entry["error"])))
    text = entry.get("text")
    if not isinstance(text, str):
        return Unusable(source, path, "no contents")
    try:
        document = host_input.loads(text)
    except ValueError as error:
        return Unusable(source, path, f"not JSON: {error}")
    try:
        return _result(source, document, path)
    except ReportError as error:
        return Unusable(source, path, str(error))
    except Exception as error:  # noqa: BLE001 - a reader's bug on hostile input: this file's finding, not a crash
        return Unusable(source, path, f"unreadable ({type(error).__name__}: {host_input.inert(str(error))[:200]})")


def _verification(document: Mapping, path: str) -> KeptResult:
    if document.get("kind") != REPORT_KIND:
        raise ReportError(f"kind {document.get('kind')!r} is not a report")
    report = Report.from_json(document)
    return KeptResult("verification", report.generated_at, report, path)


def _apt_hook(document: Mapping, path: str) -> KeptResult:
    found = HookResult.from_json(document, "it")
    return KeptResult("apt_hook", found.checked_at, found.report, path)


def _boot_check(document: Mapping, path: str) -> KeptResult:
    found = BootResult.from_json(document, "it")
    return KeptResult("boot_check", found.checked_at, found.report, path, boot=found.facts())


# source → the reader of the module that writes that file.
READERS = {"verification": _verification, "apt_hook": _apt_hook, "boot_check": _boot_check}


def _result(source: str, document: Any, path: str) -> KeptResult:
    if not isinstance(document, Mapping):
        raise ReportError("not a JSON object")
    reader = READERS.get(source)
    if reader is None:
        raise ReportError(f"{source!r} is not a result this checkout reads")
    try:
        return reader(document, path)
    except StateError as error:  # "it is not an apt hook result", "it holds no report (…)": Unusable names the file
        raise ReportError(str(error)) from None


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
    usable = isinstance(now, (int, float)) and not isinstance(now, bool) and math.isfinite(now)
    return results, unusable, float(now) if usable else None


# What `verify kept` says beside the results, as verify/debian/dpkg_log.py reads it on the host (the controller never
# imports that reader): the actions of dpkg's log that add or take away a package version, and dpkg's database.
DPKG_CHANGES = ("install", "upgrade", "remove", "purge")
DPKG_STATUS = "/var/lib/dpkg/status"


@dataclass(frozen=True)
class DpkgChange:
    """One package dpkg installed, upgraded, removed or purged (a line of /var/log/dpkg.log), by the host's clock."""

    time: float
    action: str  # one of DPKG_CHANGES
    package: str  # its name, without the architecture
    old: str | None
    new: str | None

    @property
    def text(self) -> str:
        """ "librocm-smi64-1 5.2.3-2 installed", "libfoo 1.0 → 2.0", "librocm-smi64-1 5.2.3-2 removed" """
        if self.action == "upgrade":
            return f"{self.package} {self.old} → {self.new}"
        if self.action == "install":
            return f"{self.package} {self.new} installed"
        version = f" {self.old}" if self.old else ""
        return f"{self.package}{version} {'removed' if self.action == 'remove' else 'purged'}"


@dataclass(frozen=True)
class HostNow:
    """What a host says about itself beside its results: the running boot, and what dpkg changed lately."""

    boot_id: str | None = None
    changes: tuple[DpkgChange, ...] | None = None  # oldest first; None: the log could not be read (log_error)
    complete: bool = False  # `changes` are all the log holds, not only its tail
    status_mtime: float | None = None  # /var/lib/dpkg/status's modification time
    log_error: str | None = None


_TEXT_LIMIT = 200  # a package name or version is far shorter: anything longer is not one


def _text(value: Any) -> str | None:
    return host_input.inert(value) if isinstance(value, str) and 0 < len(value) <= _TEXT_LIMIT else None


_LAST_TIME = 253402300799  # 9999-12-31T23:59:59Z: the last time a row can print; later is no time a file had
_MAX_CHANGES = 1000  # the host's reader sends at most 200


def _time(value: Any) -> float | None:
    usable = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if usable and 0 <= value <= _LAST_TIME else None


def _change(entry: Any) -> DpkgChange | None:
    if not isinstance(entry, list) or len(entry) != 5:
        return None
    stamp, action, package = _time(entry[0]), entry[1], _text(entry[2])
    if stamp is None or action not in DPKG_CHANGES or package is None:
        return None
    return DpkgChange(stamp, action, package.split(":", 1)[0], _text(entry[3]), _text(entry[4]))


def host_now(answer: Any) -> HostNow:
    """The host's boot id and dpkg's changes from its `verify kept` answer; whatever is missing or not of its type is
    None (an older verifier's answer has neither)."""
    if not isinstance(answer, Mapping):
        return HostNow()
    dpkg = answer.get("dpkg") if isinstance(answer.get("dpkg"), Mapping) else {}
    changes = dpkg.get("changes")
    parsed = None
    if isinstance(changes, list):
        parsed = tuple(change for change in map(_change, changes[-_MAX_CHANGES:]) if change is not None)
    error = dpkg.get("error")
    return HostNow(
        boot_id=_text(answer.get("boot_id")),
        changes=parsed,
        complete=dpkg.get("complete") is True,
        status_mtime=_time(dpkg.get("status_mtime")),
        log_error=host_input.inert(error[:300]) if isinstance(error, str) else None,
    )
