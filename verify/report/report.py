"""The verification report: one JSON document per host, versioned and checked against `report_schema.json`.

Each check is a `CheckResult` with a status, a one-line reason a person can act on, and the evidence it rests on.
The report's verdict is the worst status; its reason is the reason of the first failing check in `PRIORITY` order
(the linkage trap first, because that is what the rest usually follows from).

This module only shapes data; it runs nothing and reads no files (except the schema, on request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
    worst = PASS
    for check in checks:
        if _SEVERITY[check.status] > _SEVERITY[worst]:
            worst = check.status
    return worst


def report_passed(report: Mapping[str, Any]) -> bool:
    """A report whose verdict is pass or warn: what the controller and the apt hook keep as a host's last passing
    report, the baseline its drift is stated from."""
    return report.get("verdict") in (PASS, WARN)


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
