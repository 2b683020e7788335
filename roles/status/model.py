"""From what a host keeps to its row in the fleet status (pure): which results count, as of when, and what they cannot
see.

Every kept report is first held to the verifier's one rule (`judge_report`: schema, verdict from its checks, every
check the verifier always runs, the host's own name): one that proves nothing counts as a kept file that cannot be
used. Each is then held to the question this inventory asks (the verification's and the boot check's to the whole of
it, the apt hook's to the part it asks: verify.report.hook_state.SAME_QUESTION): a result that answers another one
counts for nothing while another full result answers it, and is a kept file that cannot be used when none does.
The host's row rests on its newest full result — the verification's report (last-verify.json) or the boot check's,
whichever ran later — shown "as of" its time and age (by the host's clock, so a controller whose clock is off does
not age it). The apt hook's results (static checks only) that are not older than it are added as `later`: they can
make the verdict worse, never better (summary.py's one rule). Older or superseded results are listed in the row's
details with their age, and count for nothing. A kept file that is there but cannot be used (not JSON, not a report
of a schema this checkout reads, a symlink, too large …) leaves the host NOT VERIFIED, saying which file and why.

What the results shown cannot see is said on the row (host_row.Unseen), and makes a pass a WARN: the admin must see at
a glance that a PASS is not proven for the host as it is now — yet nothing is known to be wrong, so it is no FAIL and
no NOT VERIFIED:
- packages changed since the newest result shown (dpkg's log, read by `verify kept`; its status file's time when the
  log names nothing after it): a dpkg run no hook re-checked — the hooks removed, a front end that holds dpkg's lock
  and runs no apt hook, a run killed between two dpkg runs — or the database edited past dpkg;
- the newest full result is from an earlier boot than the running one (its boot id): the runtime, NF4 and the
  kernel's driver are a boot's, and the boot check never ran in this boot, was killed, or failed before writing;
- it is older than `max_result_age` (inventory; 0: no limit): stale.
"""

from __future__ import annotations

import math
import time
from typing import Any

from roles.verification.host_row import NOT_VERIFIED, VERIFIED, HostOutcome, Later, Unseen, short_time
from verify.question import request_differences
from verify.report.hook_state import SAME_QUESTION
from verify.report.host_input import inert
from verify.report.kept import DPKG_STATUS, HostNow, KeptResult, Unusable, host_now, kept_results
from verify.report.kept import LABELS as KEPT_LABELS

NO_REPORT = "no verification report kept on the host — run pyinfra INVENTORY tasks/verify.py"
NEVER_PROVISIONED = "never provisioned: this host has no rocm-fleet verifier — run pyinfra INVENTORY deploy.py"
RE_VERIFY = "re-verify: pyinfra INVENTORY tasks/verify.py"
SHOWN_CHANGES = 5  # package changes named on a row; the rest are counted


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


def _asked(source: str, request: dict | None) -> dict | None:
    """The part of the inventory's question a source's result answers (None: not known here)."""
    if request is None:
        return None
    return {key: request[key] for key in SAME_QUESTION if key in request} if source == "apt_hook" else request


def _proven(
    results: dict[str, KeptResult], unusable: list[Unusable], hostname: str | None, request: dict | None
) -> tuple[dict[str, KeptResult], dict[str, str]]:
    """(the results whose report proves what it says and answers this inventory's question, the sources of those that
    prove it for another question: why not counted). Those that prove nothing join `unusable`, with the rule's own
    line — and so do those answering another question when no full result answers this one."""
    proven, other, judged_other = {}, {}, {}
    for source, result in results.items():
        judged = result.report.judge(hostname=hostname, request=_asked(source, request))
        if judged.trustworthy:
            proven[source] = result
        elif result.report.judge(hostname=hostname).trustworthy:
            asked = _asked(source, request) or {}
            other[source] = ", ".join(request_differences(result.report.request.to_request(), asked))
            judged_other[source] = judged
        else:
            unusable.append(Unusable(source, result.path, f"not proven — {judged.problem}"))
    if not any(result.full for result in proven.values()):
        for source in [source for source in other if results[source].full]:
            unusable.append(Unusable(source, results[source].path, f"not proven — {judged_other[source].problem}"))
            del other[source]
    return proven, other


def _unseen(
    newest: KeptResult,
    later: list[KeptResult],
    host: HostNow,
    now: float,
    max_result_age: int,
    boot_check: bool,
) -> tuple[Unseen, ...]:
    """What the results shown cannot see (see the module docstring)."""
    found = []
    since = max((r.timestamp for r in [newest, *later] if r.timestamp is not None), default=None)
    if since is not None:
        changed = _packages_changed(host, since)
        if changed:
            found.append(Unseen("packages changed", changed))
    if newest.boot_id and host.boot_id and newest.boot_id != host.boot_id:
        why = (
            "the boot check never ran in this boot, was killed, or failed before writing"
            if boot_check
            else "nothing checks after a boot (boot_check: False)"
        )
        found.append(
            Unseen(
                "earlier boot",
                f"the {newest.label}'s result ({_when(newest, now)}) is from an earlier boot than the running one: "
                f"{why} — {RE_VERIFY}",
            )
        )
    stamp = newest.timestamp
    if max_result_age > 0 and stamp is not None and now - stamp > max_result_age:
        found.append(
            Unseen(
                "stale",
                f"stale: the newest full result ({newest.label}, {_when(newest, now)}) is older than "
                f"max_result_age ({_duration(max_result_age)}) — {RE_VERIFY}",
            )
        )
    return tuple(found)


def _packages_changed(host: HostNow, since: float) -> str | None:
    """ "packages changed since …: what" when dpkg changed packages after `since` (the newest result shown): the
    changes its log names, else the time its status file changed (a log rotated away or unreadable, a status file
    edited past dpkg); None when neither moved after it."""
    when = short_time(_iso(since))
    after = [change for change in host.changes or () if change.time > since]
    if after:
        last = {}
        for change in after:  # one mention per package: what it came to
            last.pop(change.package, None)
            last[change.package] = change
        named = [change.text for change in last.values()]
        more = f" (+{len(named) - SHOWN_CHANGES} more)" if len(named) > SHOWN_CHANGES else ""
        earlier = "" if host.complete or len(after) < len(host.changes) else "; the log's tail only: maybe more"
        what = ", ".join(named[:SHOWN_CHANGES]) + more + earlier
        return f"packages changed since {when}: {what} — no result shown covers them; {RE_VERIFY}"
    # Whole seconds: a result's time is, and the hook that follows a dpkg run starts within its second.
    if host.status_mtime is None or math.floor(host.status_mtime) <= since:
        return None
    why = f"its log cannot say what: {host.log_error}" if host.changes is None else "its log names no package since"
    return (
        f"packages changed since {when}: the dpkg database ({DPKG_STATUS}) was changed at "
        f"{short_time(_iso(host.status_mtime))} ({why}) — {RE_VERIFY}"
    )


def _iso(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def outcome_of(
    host_name: str,
    answer: Any,
    torch_label: str | None = None,
    now: float | None = None,
    request: dict | None = None,
    max_result_age: int = 0,
    boot_check: bool = True,
) -> HostOutcome:
    """The host's outcome from its KeptResults fact (`answer`); `now` only when the host did not say its time;
    `request`: what the verification stage asks of this host (its report must answer that); `max_result_age`
    (seconds, 0: no limit) and `boot_check`: the inventory's. Whatever the host's answer holds, this is a row: a
    failure to read it is that host's NOT VERIFIED, never the fleet's status lost."""
    try:
        return _outcome_of(host_name, answer, torch_label, now, request, max_result_age, boot_check)
    except Exception as error:  # noqa: BLE001 - a reader's bug on hostile input: this host's finding, not a crash
        why = f"{type(error).__name__}: {inert(str(error))[:200]}"
        return HostOutcome(
            host_name, NOT_VERIFIED, torch_label=torch_label, detail=f"could not read what the host keeps ({why})"
        )


def _outcome_of(
    host_name: str,
    answer: Any,
    torch_label: str | None,
    now: float | None,
    request: dict | None,
    max_result_age: int,
    boot_check: bool,
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
    kept, unusable, host_clock = kept_results(answer)
    hostname = inert(answer["hostname"]) if isinstance(answer.get("hostname"), str) else None
    results, other = _proven(kept, unusable, hostname, request)
    now = host_clock if host_clock is not None else (now if now is not None else time.time())
    full = [r for r in results.values() if r.full]
    newest = max(full, key=lambda r: r.timestamp or 0.0) if full else None
    since = newest.timestamp if newest is not None and newest.timestamp is not None else float("-inf")
    # Without a time it cannot be placed: counted as later, which can only make the verdict worse.
    later = [r for r in results.values() if not r.full and (r.timestamp is None or r.timestamp >= since)]
    later.sort(key=lambda r: r.timestamp or 0.0)
    sources = []
    for source, label in KEPT_LABELS.items():
        if source in results or source in other:
            result = kept[source]
            use = (
                f"answers another question ({other[source]}): not counted"
                if source in other
                else "shown"
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
    unseen = _unseen(newest, later, host_now(answer), now, max_result_age, boot_check) if newest is not None else ()
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
        unseen=unseen,
    )
