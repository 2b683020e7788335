"""The verification report: one JSON document per host, versioned and checked against `report_schema.json`.

Each check is a `CheckResult` with a status, a one-line reason a person can act on, and the evidence it rests on.
The report's verdict is the worst status; its reason is the reason of the first failing check in `PRIORITY` order
(the linkage trap first, because that is what the rest usually follows from).

`judge_report` is the one rule for *whether a report proves a host passed*, used wherever that is decided — the
controller (roles/verification), its report history, the fleet summary, the demo's verdict, the apt hook's state, and
`verify check`'s own exit status (`exit_status_of`). A report proves a pass only when it matches report_schema.json
(verify/schema_check.py), its verdict is pass or warn, no check failed, the verdict is the one its checks give, every
check the verifier always runs is there, and — where the caller knows them — it answers the question asked of this
host (request, host name) and the verifier's exit status is the one its verdict documents (0 for pass and warn, 1 for
fail). Anything else is either an honest fail (a trustworthy report whose verdict is fail) or proves nothing, with
one line saying what was wrong and what to do.

This module only shapes and judges data; it runs nothing and reads no files (except the schema, on request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Mapping

SCHEMA_VERSION = 1
KIND = "rocm-fleet.verify-report"
SCHEMA_RESOURCE = "report_schema.json"

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
STATUSES = (PASS, WARN, FAIL, SKIP)
_SEVERITY = {SKIP: 0, PASS: 0, WARN: 1, FAIL: 2}

# Which failure explains a host best, when several fail: the loader trap, then what was installed, then runtime.
PRIORITY = (
    "linkage.static",
    "versions.rocm",
    "versions.torch",
    "versions.bitsandbytes",
    "strays",
    "runtime.torch",
    "runtime.bnb_library",
    "runtime.devices",
    "runtime.maps",
    "nf4",
)


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. `reason` is one line; `evidence` is JSON-able data that supports it."""

    id: str
    title: str
    status: str
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        if "\n" in self.reason:
            # A reason is what the summary and pyinfra print on one line.
            object.__setattr__(self, "reason", " ".join(self.reason.split()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "evidence": _jsonable(self.evidence),
        }


def verdict_of(checks: Iterable[CheckResult]) -> str:
    return _worst(check.status for check in checks)


# The checks every report has (verify/host_check.py always runs them): without them a report proves nothing.
STATIC_CHECK_IDS = ("linkage.static", "versions.rocm", "versions.torch", "versions.bitsandbytes", "strays")
# … and a report that is not static-only and passes has the runtime ones too (a failing one may stop at
# runtime.torch: the probe did not run or import torch failed), and at least one NF4 run ("nf4" or "nf4.<device>").
RUNTIME_CHECK_IDS = ("runtime.torch", "runtime.devices", "runtime.bnb_library", "runtime.maps")
EXIT_STATUS = {PASS: 0, WARN: 0, FAIL: 1}  # what `verify check` exits with for each verdict (README, check.py)
IN_PROCESS = "in-process"  # judge_report(exit_status=IN_PROCESS): the report was not read from a verifier process
RERUN_FIX = ("run tasks/verify.py again from this checkout (it uploads this checkout's verifier); if it happens again, "
             "the verifier on the host is damaged or not this checkout's")


@dataclass(frozen=True)
class Judgement:
    """Whether a report proves the host passed. `problem` (one line, with `fix`) when the report proves nothing."""

    passed: bool
    problem: str | None = None
    fix: str | None = None

    @property
    def trustworthy(self) -> bool:
        """The report is a real answer of this verifier to the question asked (pass or fail)."""
        return self.problem is None

    def line(self) -> str:
        return f"{self.problem} — {self.fix}" if self.problem else ""


def exit_status_of(report: Mapping[str, Any]) -> int:
    """The exit status `verify check` documents for the report's verdict."""
    return EXIT_STATUS.get(report.get("verdict"), 1)


def judge_report(
    report: Any,
    *,
    exit_status: int | str | None = IN_PROCESS,
    hostname: str | None = None,
    request: Mapping[str, Any] | None = None,
) -> Judgement:
    """The one rule (see the module docstring). `exit_status`: the verifier's, None when it never came, IN_PROCESS
    when there was no verifier process (the apt hook's own report, a report kept on disk). `hostname`, `request`: what
    the host says its name is and what was asked of it, when the caller knows."""
    error = _schema_validator().first_error(report)
    if error is not None:
        return Judgement(False, f"the report does not match verify/report_schema.json ({error})", RERUN_FIX)
    statuses = [check["status"] for check in report["checks"]]
    verdict, worst = report["verdict"], _worst(statuses)
    if verdict != worst:
        odd = next((c for c in report["checks"] if c["status"] == worst), None)
        because = f"check {odd['id']} is {worst}" if odd else "no check has that status"
        return Judgement(False, f"the report's verdict {verdict!r} is not what its checks give ({worst!r}: {because})",
                         RERUN_FIX)
    ids = [check["id"] for check in report["checks"]]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        return Judgement(False, f"the report lists check(s) {', '.join(twice)} more than once", RERUN_FIX)
    required = _required_checks(report)
    missing = [i for i in required if i not in ids]
    if missing:
        return Judgement(False, f"the report lacks check(s) {', '.join(missing)} that the verifier always runs",
                         RERUN_FIX)
    # Only the maps comparison may be skipped (nothing to compare); a pass resting on a skipped check is no pass.
    skipped = [c["id"] for c in report["checks"] if c["status"] == SKIP and c["id"] in required
               and c["id"] != "runtime.maps"]
    if skipped and verdict != FAIL:
        return Judgement(False, f"the report passes with check(s) {', '.join(skipped)} skipped", RERUN_FIX)
    if request is not None:
        asked = report["request"]
        wrong = [f"{key} {asked.get(key)!r} (asked {value!r})" for key, value in request.items()
                 if not _same(asked.get(key), value)]
        if wrong:
            return Judgement(False, f"the report answers another question: {', '.join(wrong)}", RERUN_FIX)
    if hostname is not None and report["host"]["hostname"] != hostname:
        return Judgement(False, f"the report is from host {report['host']['hostname']!r}, this host says it is "
                                f"{hostname!r}", "check this host's address in the inventory, then " + RERUN_FIX)
    if exit_status != IN_PROCESS:
        documented = EXIT_STATUS[verdict]
        if exit_status is None:
            return Judgement(False, "the verifier's exit status never came back (it or the connection died before "
                                    "the end)", RERUN_FIX)
        if exit_status != documented:
            return Judgement(False, f"the verifier exited {exit_status}, but a {verdict!r} report means exit "
                                    f"{documented}", RERUN_FIX)
    return Judgement(verdict in (PASS, WARN))


def report_passed(report: Any, **known: Any) -> bool:
    """`judge_report(report, **known).passed`: what the controller and the apt hook keep as a host's last passing
    report, the baseline its drift is stated from."""
    return judge_report(report, **known).passed


def _worst(statuses: Iterable[str]) -> str:
    worst = PASS
    for status in statuses:
        if _SEVERITY[status] > _SEVERITY[worst]:
            worst = status
    return worst


def _required_checks(report: Mapping[str, Any]) -> list[str]:
    required = list(STATIC_CHECK_IDS)
    if not report["request"].get("static_only"):
        required.append(RUNTIME_CHECK_IDS[0])
        if report["verdict"] != FAIL:
            required += RUNTIME_CHECK_IDS[1:]
            if not any(c["id"] == "nf4" or c["id"].startswith("nf4.") for c in report["checks"]):
                required.append("nf4")
    return required


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


@lru_cache(maxsize=1)
def _schema_validator():
    from verify.schema_check import Validator

    return Validator(load_schema())


def _priority(check: CheckResult) -> int:
    for index, prefix in enumerate(PRIORITY):
        if check.id == prefix or check.id.startswith(prefix + "."):
            return index
    return len(PRIORITY)


def headline(checks: Iterable[CheckResult]) -> str:
    """The one line that explains the verdict: the most telling failure (and how many more), else a pass line."""
    checks = list(checks)
    failed = sorted((c for c in checks if c.status == FAIL), key=_priority)
    if failed:
        more = f"; {len(failed) - 1} more check(s) failed" if len(failed) > 1 else ""
        return f"{failed[0].id}: {failed[0].reason}{more}"
    warned = sorted((c for c in checks if c.status == WARN), key=_priority)
    if warned:
        more = f"; {len(warned) - 1} more warning(s)" if len(warned) > 1 else ""
        return f"passed with warnings — {warned[0].id}: {warned[0].reason}{more}"
    return f"all {sum(1 for c in checks if c.status == PASS)} checks passed"


def build_report(
    *,
    host: Mapping[str, Any],
    request: Mapping[str, Any],
    facts: Mapping[str, Any],
    checks: list[CheckResult],
    generated_at: str,
    tool_version: str,
) -> dict[str, Any]:
    """The report as a JSON-able dict (the shape `report_schema.json` describes)."""
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "generated_at": generated_at,
        "tool": {"name": "rocm-fleet verify", "version": tool_version},
        "host": _jsonable(host),
        "request": _jsonable(request),
        "facts": _jsonable(facts),
        "verdict": verdict_of(checks),
        "reason": headline(checks),
        "checks": [c.to_dict() for c in checks],
    }


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, read from the package (works from a checkout and from the zipapp)."""
    from importlib import resources

    return json.loads(resources.files(__package__).joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8"))


def _jsonable(value: Any) -> Any:
    """Plain JSON types only: tuples become lists, mappings dicts, other objects their str()."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
