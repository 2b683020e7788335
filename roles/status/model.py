"""From what a host keeps to its row in the fleet status (pure): which results count, and as of when.

Every kept report is first held to the verifier's one rule (`judge_report`: schema, verdict from its checks, every
check the verifier always runs, the host's own name, and for the verification's report the question this inventory
asks): one that proves nothing counts as a kept file that cannot be used. The host's row rests on its newest full
result — the verification's report (last-verify.json) or the boot check's,
whichever ran later — shown "as of" its time and age (by the host's clock, so a controller whose clock is off does
not age it). The apt hook's results (static checks only) that are not older than it are added as `later`: they can
make the verdict worse, never better (summary.py's one rule). Older or superseded results are listed in the row's
details with their age, and count for nothing. A kept file that is there but cannot be used (not JSON, not a report
of a schema this checkout reads, a symlink, too large …) leaves the host NOT VERIFIED, saying which file and why.
"""

from __future__ import annotations

import time
from typing import Any

from roles.verification.host_row import NOT_VERIFIED, VERIFIED, HostOutcome, Later, short_time
from verify.report.host_input import inert
from verify.report.kept import LABELS as KEPT_LABELS
from verify.report.kept import KeptResult, Unusable, kept_results

NO_REPORT = "no verification report kept on the host — run pyinfra INVENTORY tasks/verify.py"
NEVER_PROVISIONED = "never provisioned: this host has no rocm-fleet verifier — run pyinfra INVENTORY deploy.py"


def age(seconds: float) -> str:
    """ "40 s ago", "5 min ago", "3 h ago", "2 d ago"; "in the future" for a clock ahead of the host's."""
    if seconds < -60:
        return "in the future (clock skew?)"
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def _when(result: KeptResult, now: float) -> str:
    stamp = result.timestamp
    return short_time(result.checked_at) + (f" ({age(now - stamp)})" if stamp is not None else "")


def _label(result: KeptResult) -> str:
    """ "boot check in 6.8.0-51-generic (after the reboot from 6.8.0-49-generic)": which boot a boot check's was."""
    boot = result.boot
    if boot is None:
        return result.label
    after = (
        f" (after the reboot from {boot.previous_kernel})"
        if boot.previous_kernel and boot.previous_kernel != boot.kernel
        else ""
    )
    return f"{result.label} in {boot.kernel}{after}"


def _proven(
    results: dict[str, KeptResult], unusable: list[Unusable], hostname: str | None, request: dict | None
) -> dict[str, KeptResult]:
    """The results whose report proves what it says; the others join `unusable`, with the rule's own line."""
    proven = {}
    for source, result in results.items():
        judged = result.report.judge(hostname=hostname, request=request if source == "verification" else None)
        if judged.trustworthy:
            proven[source] = result
        else:
            unusable.append(Unusable(source, result.path, f"not proven — {judged.problem}"))
    return proven


def outcome_of(
    host_name: str, answer: Any, torch_label: str | None = None, now: float | None = None, request: dict | None = None
) -> HostOutcome:
    """The host's outcome from its KeptResults fact (`answer`); `now` only when the host did not say its time;
    `request`: what the verification stage asks of this host (its report must answer that). Whatever the host's
    answer holds, this is a row: a failure to read it is that host's NOT VERIFIED, never the fleet's status lost."""
    try:
        return _outcome_of(host_name, answer, torch_label, now, request)
    except Exception as error:  # noqa: BLE001 - a reader's bug on hostile input: this host's finding, not a crash
        why = f"{type(error).__name__}: {inert(str(error))[:200]}"
        return HostOutcome(
            host_name, NOT_VERIFIED, torch_label=torch_label, detail=f"could not read what the host keeps ({why})"
        )


def _outcome_of(
    host_name: str, answer: Any, torch_label: str | None, now: float | None, request: dict | None
) -> HostOutcome:
    if not isinstance(answer, dict) or "files" not in answer:
        why = inert(str(answer.get("error"))) if isinstance(answer, dict) and "error" in answer else None
        never = isinstance(answer, dict) and answer.get("provisioned") is False
        return HostOutcome(
            host_name,
            NOT_VERIFIED,
            torch_label=torch_label,
            detail=NEVER_PROVISIONED if never else f"could not read what the host keeps: {why or 'no answer'}",
        )
    results, unusable, host_now = kept_results(answer)
    hostname = inert(answer["hostname"]) if isinstance(answer.get("hostname"), str) else None
    results = _proven(results, unusable, hostname, request)
    now = host_now if host_now is not None else (now if now is not None else time.time())
    full = [r for r in results.values() if r.full]
    newest = max(full, key=lambda r: r.timestamp or 0.0) if full else None
    since = newest.timestamp if newest is not None and newest.timestamp is not None else float("-inf")
    # Without a time it cannot be placed: counted as later, which can only make the verdict worse.
    later = [r for r in results.values() if not r.full and (r.timestamp is None or r.timestamp >= since)]
    later.sort(key=lambda r: r.timestamp or 0.0)
    sources = []
    for source, label in KEPT_LABELS.items():
        if source in results:
            result = results[source]
            use = (
                "shown"
                if result is newest
                else "can only make it worse"
                if result in later
                else "older than what is shown: not counted"
            )
            sources.append(f"{_label(result)}: {result.report.verdict.upper()} as of {_when(result, now)} — {use}")
        elif any(item.source == source for item in unusable):
            sources.append(f"{label}: cannot be used")
        else:
            sources.append(f"{label}: none kept")
    return HostOutcome(
        host_name,
        VERIFIED if newest is not None else NOT_VERIFIED,
        report=newest.report if newest is not None else None,
        detail=None if newest is not None else NO_REPORT,
        torch_label=torch_label,
        as_of=_when(newest, now) if newest is not None else None,
        later=tuple(Later(f"{r.label}, {_when(r, now)}", r.report) for r in later),
        unusable=tuple(item.line for item in unusable),
        sources=tuple(sources),
    )
