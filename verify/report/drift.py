"""Drift: what changed on a host between two verification reports, in plain words.

`compare_reports(baseline, current)` takes two `verify check` reports (full or --static-only) and states each
difference as one `Change`, e.g.

    librocm_smi64.so.1 now resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 from librocm-smi64-1 6.1.2-1
    (distro) instead of /opt/rocm-7.2.4/lib
    new stray package: libamdhip64-5 5.7.1-6+deb13u1 (pulled in by libucx0)
    stray package gone: librocm-smi64-1 5.2.3-2

Each change is `worse`, `better` or just `changed`, so that the apt hook warns when a dpkg run made something worse
and says so when it cleared. The apt hook compares each result with the one before it (on the host); tasks/verify.py
compares reports/<host>.json with the host's last passing report (on the controller).

What it compares: where each ROCm library of the predicted process resolves (and what is not found), the stray distro
ROCm packages, the kernels installed (one without amdgpu.ko is worse: the GPU goes at the next boot) and the one
running ("after the reboot into 6.8.0-51-generic the GPU is gone: …"), a new result of the boot-time check, the
status of every check both reports ran (a static-only report against a full one leaves the runtime checks out), and
the installed versions. A version-1 report (before the kernel facts) is compared on what it has. What it does not do:
judge — whether something is wrong is the checks' business, drift says what moved. Pure: takes two Reports, returns
frozen dataclasses, reads nothing. A report whose evidence is not shaped like this verifier's raises report.ReportError.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verify.debian.strays import Stray
from verify.report.report import ELSEWHERE, SEVERITY, LinkageEvidence, Report
from verify.stack.rocm_libraries import is_rocm_library

WORSE, BETTER, CHANGED = "worse", "better", "changed"
DIRECTIONS = (WORSE, BETTER, CHANGED)

LINKAGE, STRAYS, CHECKS, VERSIONS = "linkage", "strays", "checks", "versions"
KERNEL, BOOT = "kernel", "boot"
_FACTS = (  # facts whose change is worth a line: (key, how a person names it)
    ("rocm", "system ROCm"),
    ("torch", "torch"),
    ("torch_hip", "torch's HIP"),
    ("bitsandbytes", "bitsandbytes"),
)  # not bnb_library: a full report names the library the runtime loaded, a static one the library it would pick


@dataclass(frozen=True)
class Change:
    direction: str  # WORSE | BETTER | CHANGED
    topic: str  # LINKAGE | STRAYS | CHECKS | VERSIONS
    text: str  # one line, plain words

    def to_json(self) -> dict:
        return {"direction": self.direction, "topic": self.topic, "text": self.text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        return cls(data["direction"], data["topic"], data["text"])


@dataclass(frozen=True)
class Drift:
    """The changes from `baseline` (described in words, e.g. "the last passing report of 2026-11-29T18:40:02Z")."""

    baseline: str
    verdict_before: str
    verdict_after: str
    changes: tuple[Change, ...] = ()

    @property
    def worse(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.direction == WORSE)

    @property
    def better(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.direction == BETTER)

    @property
    def got_worse(self) -> bool:
        return bool(self.worse)

    def ordered(self) -> tuple[Change, ...]:
        """Worse first, then better, then the rest; within each, the order they were found in."""
        return tuple(sorted(self.changes, key=lambda c: DIRECTIONS.index(c.direction)))

    def lines(self) -> list[str]:
        """One line per change, marked with its direction: "worse: new stray package: …"."""
        return [f"{c.direction}: {c.text}" for c in self.ordered()]

    def summary(self) -> str:
        """One line for a log or a table cell."""
        if not self.changes:
            return f"no change since {self.baseline}"
        counts = ", ".join(f"{n} {d}" for d in DIRECTIONS if (n := sum(c.direction == d for c in self.changes)))
        first = self.ordered()[0]
        more = f" (+{len(self.changes) - 1} more)" if len(self.changes) > 1 else ""
        return f"since {self.baseline}: {counts} — {first.direction}: {first.text}{more}"

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "verdict_before": self.verdict_before,
            "verdict_after": self.verdict_after,
            "changes": [c.to_json() for c in self.ordered()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Drift:
        return cls(
            data["baseline"],
            data["verdict_before"],
            data["verdict_after"],
            tuple(Change.from_json(c) for c in data["changes"]),
        )


def compare_reports(baseline: Report, current: Report, *, baseline_label: str = "the previous report") -> Drift:
    """Every difference from `baseline` to `current` (both `verify check` reports), as a Drift."""
    changes: list[Change] = []
    linkage = _linkage_changes(_places(baseline.linkage()), _places(current.linkage()))
    strays = _stray_changes(_strays(baseline), _strays(current))
    kernel = _kernel_changes(baseline, current) + _boot_changes(baseline, current)
    changes += kernel
    changes += linkage
    changes += strays
    changes += _check_changes(baseline, current, explained={LINKAGE: linkage, STRAYS: strays, KERNEL: kernel})
    changes += _fact_changes(baseline, current)
    return Drift(baseline_label, baseline.verdict, current.verdict, tuple(changes))


# --- linkage ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Place:
    """Where one library name resolves in the predicted process (path None: not found)."""

    path: str | None
    real: str | None = None
    origin: str | None = None  # "torch/lib" | "ROCm X.Y.Z" | ELSEWHERE
    package: str | None = None  # "librocm-smi64-1 6.1.2-1 (distro)"

    @property
    def bad(self) -> bool:
        return self.path is None or self.origin == ELSEWHERE

    def where(self) -> str:
        return self.path + (f" from {self.package}" if self.package else "") if self.path else "not found"

    def directory(self) -> str:
        owner = f" from {self.package}" if self.package else ""
        return f"{posixpath.dirname(self.path)}{owner}" if self.path else "not found"

    def same_as(self, other: _Place) -> bool:
        return (self.real or self.path, self.package) == (other.real or other.path, other.package)


def _places(linkage: LinkageEvidence | None) -> dict[str, _Place] | None:
    """name → where it resolves, for every ROCm library of the process and everything not found; None when the
    report has no process model (the check stopped before it, e.g. bitsandbytes not installed)."""
    if linkage is None:
        return None
    places: dict[str, _Place] = {}
    for line in linkage.missing:
        # Request.describe(): the name comes first ("libhipblas.so.3 (needed by …) not found via …").
        places.setdefault(line.split(" ", 1)[0], _Place(None))
    for obj in linkage.rocm_objects:
        places.setdefault(obj.requested_as, _Place(obj.path, obj.real_path, obj.origin, obj.package))
    for needed in linkage.bnb_needed:
        if needed.path and is_rocm_library(needed.name):
            places.setdefault(needed.name, _Place(needed.path, needed.path, needed.origin))
    return places


def _direction(before_bad: bool, after_bad: bool) -> str:
    if after_bad and not before_bad:
        return WORSE
    if before_bad and not after_bad:
        return BETTER
    return CHANGED


def _linkage_changes(before: dict[str, _Place] | None, after: dict[str, _Place] | None) -> list[Change]:
    if before is None or after is None:
        return []  # one side has no process model: the check's status line says why
    changes: list[Change] = []
    also_loaded: dict[str, list[str]] = {}  # origin → names now loaded that were not in the process (not a problem)
    not_loaded: list[str] = []

    def add(direction: str, text: str) -> None:
        changes.append(Change(direction, LINKAGE, text))

    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None and old.same_as(new):
            continue
        if old is None:
            if new.path is None:
                add(WORSE, f"{name} is now asked for and not found")
            elif new.bad:
                add(WORSE, f"{name} is now loaded from {new.where()}")
            else:
                also_loaded.setdefault(new.origin or posixpath.dirname(new.path), []).append(name)
        elif new is None:
            if old.path is None:
                add(BETTER, f"{name} is no longer asked for (it was not found)")
            elif old.bad:
                add(BETTER, f"{name} from {old.where()} is no longer loaded")
            else:
                not_loaded.append(name)
        elif new.path is None:
            add(WORSE, f"{name} is no longer found (it resolved to {old.where()})")
        elif old.path is None:
            verb = "is found now:" if not new.bad else "now resolves to"
            add(
                _direction(True, new.bad),
                f"{name} {verb} {new.where()}" + ("" if not new.bad else " (it was not found before)"),
            )
        elif old.path == new.path and old.package != new.package:
            add(
                _direction(old.bad, new.bad),
                f"{name} at {new.path} now comes from {new.package or 'no known package'} instead of "
                f"{old.package or 'no known package'}",
            )
        elif old.path == new.path:
            add(_direction(old.bad, new.bad), f"{name} at {new.path} is now the file {new.real} instead of {old.real}")
        else:
            add(_direction(old.bad, new.bad), f"{name} now resolves to {new.where()} instead of {old.directory()}")
    for origin, names in sorted(also_loaded.items()):
        add(CHANGED, f"now also loaded from {origin}: {', '.join(names)}")
    if not_loaded:
        add(CHANGED, f"no longer loaded: {', '.join(not_loaded)}")
    return changes


# --- strays ----------------------------------------------------------------------------------------------------------


def _strays(report: Report) -> dict[str, Stray] | None:
    """package name → its entry of the strays report; None when the report could not read dpkg's database."""
    found_report = report.strays()
    if found_report is None:
        return None
    found: dict[str, Stray] = {}
    for stray in found_report.strays:
        found[stray.package if stray.package not in found else f"{stray.package}:{stray.architecture}"] = stray
    return found


def _why_there(stray: Stray) -> str:
    if stray.pulled_in_by:
        return f"pulled in by {', '.join(stray.pulled_in_by)}"
    if stray.needed_by:
        return f"needed by {', '.join(stray.needed_by)}"
    return "nothing depends on it" if stray.auto_installed else "installed by hand"


def _ships(sonames) -> str:
    return f"ships {', '.join(sonames)}, which a ROCm 7.2 consumer could bind to" if sonames else ""


def _stray_changes(before: dict[str, Stray] | None, after: dict[str, Stray] | None) -> list[Change]:
    if before is None or after is None:
        return []
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None:
            ships = _ships(new.rocm_7_2_sonames)
            changes.append(
                Change(
                    WORSE,
                    STRAYS,
                    f"new stray package: {name} {new.version} ({_why_there(new)}{'; ' + ships if ships else ''})",
                )
            )
        elif new is None:
            changes.append(Change(BETTER, STRAYS, f"stray package gone: {name} {old.version}"))
        elif old.version != new.version:
            risk = [s for s in new.rocm_7_2_sonames if s not in old.rocm_7_2_sonames]
            text = f"stray package {name} is now {new.version} (was {old.version})"
            changes.append(
                Change(WORSE if risk else CHANGED, STRAYS, text + (f"; it now {_ships(risk)}" if risk else ""))
            )
    return changes


# --- kernel and boot -------------------------------------------------------------------------------------------------


def _gpu_gone_reason(report: Report) -> str | None:
    """Why the running kernel drives no GPU, when its check failed (kernel.driver's reason)."""
    check = report.check("kernel.driver")
    return check.reason if check is not None and check.status == "fail" else None


def _kernel_changes(before: Report, after: Report) -> list[Change]:
    """Kernels installed or removed (one without amdgpu.ko is worse: the GPU is gone once it boots) and a reboot into
    another kernel (worse when the GPU went with it). Nothing when either report has no kernel facts (version 1)."""
    old, new = before.facts.kernel, after.facts.kernel
    if old is None or new is None:
        return []
    changes = []
    for release in new.installed:
        if release in old.installed:
            if release in new.without_amdgpu and release not in old.without_amdgpu:
                changes.append(Change(WORSE, KERNEL, f"kernel {release} lost its amdgpu.ko"))
            elif release in old.without_amdgpu and release not in new.without_amdgpu:
                changes.append(Change(BETTER, KERNEL, f"kernel {release} has amdgpu.ko again"))
            continue
        if release in new.without_amdgpu:
            boots = ": it boots next — after the next reboot the GPU is gone" if release == new.next_boot else ""
            changes.append(Change(WORSE, KERNEL, f"kernel {release} was installed without amdgpu.ko{boots}"))
        else:
            changes.append(Change(CHANGED, KERNEL, f"kernel {release} was installed (amdgpu.ko present)"))
    for release in old.installed:
        if release not in new.installed:
            changes.append(Change(CHANGED, KERNEL, f"kernel {release} was removed"))
    if old.running and new.running and old.running != new.running:
        gone = _gpu_gone_reason(after)
        if gone and not _gpu_gone_reason(before):
            changes.append(Change(WORSE, KERNEL, f"after the reboot into {new.running} the GPU is gone: {gone}"))
        else:
            changes.append(Change(CHANGED, KERNEL, f"the host rebooted into {new.running} (it ran {old.running})"))
    return changes


def _boot_changes(before: Report, after: Report) -> list[Change]:
    """A new result of the boot-time check (a boot happened since the baseline): worse when it failed."""
    old, new = before.facts.boot_check, after.facts.boot_check
    if new is None or (old is not None and old.boot_id == new.boot_id):
        return []
    reason = new.reason.split(": ", 1)[1] if new.reason.startswith("kernel.driver: ") else None
    if new.verdict == "fail":
        said = f"the GPU is gone: {reason}" if reason else f"the boot-time check failed: {new.reason}"
        return [Change(WORSE, BOOT, f"after the reboot into {new.kernel} {said} (checked {new.checked_at})")]
    direction = BETTER if old is not None and old.verdict == "fail" else CHANGED
    return [
        Change(
            direction,
            BOOT,
            f"the boot-time check after the reboot into {new.kernel} passed ({new.verdict}, {new.checked_at})",
        )
    ]


# --- checks and versions ---------------------------------------------------------------------------------------------


def _check_changes(before: Report, after: Report, explained: Mapping[str, list[Change]]) -> list[Change]:
    """A line per check whose status moved — unless the detailed lines of its topic already say it in that
    direction (a new stray is the reason the strays check went from pass to warn: one line is enough)."""
    old_status = {c.id: c for c in before.checks}
    topic_of = {"linkage.static": LINKAGE, "strays": STRAYS, "kernel.driver": KERNEL, "kernel.next_boot": KERNEL}
    changes = []
    for check in after.checks:
        old = old_status.get(check.id)
        if old is None or old.status == check.status:
            continue
        was, now = old.status, check.status
        rise = SEVERITY[now] - SEVERITY[was]
        direction = WORSE if rise > 0 else BETTER if rise < 0 else CHANGED  # pass ↔ skip: changed
        topic = topic_of.get(check.id, "")
        details = explained.get(topic, [])
        # A kernel installed or removed, or a reboot, is the reason the kernel checks moved: its line says it.
        if any(d.direction == direction for d in details) or (topic == KERNEL and details):
            continue
        changes.append(Change(direction, CHECKS, f"{check.id}: {was} → {now} — {check.reason}"))
    return changes


def _fact_changes(before: Report, after: Report) -> list[Change]:
    changes = []
    for key, label in _FACTS:
        old, new = getattr(before.facts, key), getattr(after.facts, key)
        if old == new:
            continue
        changes.append(Change(CHANGED, VERSIONS, f"{label}: {old or 'none'} → {new or 'none'}"))
    return changes
