"""The fleet summary: one row per host, as Markdown and as one self-contained HTML page (no external assets).

Pure: takes the hosts' outcomes (their reports, or why there is none) and returns text. Columns: host, OS, ROCm,
torch (with the inventory's `torch_label` when set, e.g. a CPU stand-in for the ROCm wheel), bitsandbytes, GPUs and
their archs, linkage, strays, NF4 error, verdict with its one-line reason. Hosts with no report are marked
UNREACHABLE (never connected) or NOT VERIFIED (failed before or while verifying, with where and why); so is a host
whose report does not prove what it says (verify/report/report.py `judge_report`, the rule the verification stage
applies): a row says PASS or WARN only for a report that proves it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Iterable

from verify.api import PASS, Report

VERIFIED, UNREACHABLE, NOT_VERIFIED = "verified", "unreachable", "not verified"
COLUMNS = ("Host", "OS", "ROCm", "torch", "bitsandbytes", "GPUs (arch)", "Linkage", "Strays", "NF4 error", "Verdict")
NONE = "—"


@dataclass(frozen=True)
class HostOutcome:
    host: str
    state: str  # VERIFIED | UNREACHABLE | NOT_VERIFIED
    report: Report | None = None
    detail: str | None = None  # one line: why there is no report
    torch_label: str | None = None
    drift: tuple[str, ...] = ()  # what changed since the host's last passing report (roles/verification/report_history.py)


@dataclass(frozen=True)
class Row:
    host: str
    verdict: str  # PASS | WARN | FAIL | UNREACHABLE | NOT VERIFIED
    reason: str
    torch: str = NONE
    os: str = NONE
    rocm: str = NONE
    bitsandbytes: str = NONE
    gpus: str = NONE
    linkage: str = NONE
    strays: str = NONE
    nf4: str = NONE
    problems: tuple[str, ...] = ()  # failing and warning checks, and the drift, one line each

    @property
    def cells(self) -> tuple[str, ...]:
        """One per COLUMNS entry after "Host"."""
        return (self.os, self.rocm, self.torch, self.bitsandbytes, self.gpus, self.linkage, self.strays, self.nf4,
                self.verdict)


def _gpus(report: Report) -> str:
    gpus, mode = report.facts.gpus, report.facts.device_mode
    if gpus is None:
        return "not probed"
    if not gpus:
        return "none (CPU run)" if mode == "cpu" else "none"
    archs = ", ".join(f"{g.arch or '?'}{'' if g.supported else ' ⚠'}" for g in gpus)
    note = " — CPU run" if mode == "cpu" else ""
    return f"{len(gpus)} ({archs}){note}"


def _nf4(report: Report) -> str:
    runs = report.facts.nf4
    if not runs:
        return "not run"
    parts = []
    for run in runs:
        value = run.roundtrip_mean_abs_error
        number = f"{value:.4f}" if isinstance(value, (int, float)) else "—"
        flag = "" if run.status == PASS else " ✗"
        parts.append(f"{run.device or '?'} {number}{flag}")
    text = ", ".join(parts)
    if not any(run.gpu_pass for run in runs):
        text += " (CPU, not a GPU pass)"
    return text


def _strays(report: Report) -> str:
    strays = report.facts.strays
    if strays is None:
        return "not checked"
    if not strays.count:
        return "none"
    risky = set(strays.binding_risk)
    # The packages that ship a SONAME a ROCm 7.2 consumer could bind to matter most: list them first, so the cut
    # to four names never hides one behind "+N".
    names = sorted(strays.packages, key=lambda name: name not in risky)
    shown = ", ".join(f"{n}{' ⚠' if n in risky else ''}" for n in names[:4])
    more = f" +{len(names) - 4}" if len(names) > 4 else ""
    return f"{strays.count}: {shown}{more}"


def _linkage(report: Report) -> str:
    linkage = report.facts.linkage
    if not linkage:
        return "not checked"
    detail = linkage.short or linkage.reason
    return f"{linkage.status.upper()}: {detail}" if detail else linkage.status.upper()


def row_for(outcome: HostOutcome) -> Row:
    report = outcome.report
    judged = report.judge() if report is not None else None
    if judged is not None and not judged.trustworthy:
        report, outcome = None, HostOutcome(outcome.host, NOT_VERIFIED, detail=f"not proven — {judged.line()}",
                                            torch_label=outcome.torch_label)
    if report is None:
        verdict = "UNREACHABLE" if outcome.state == UNREACHABLE else "NOT VERIFIED"
        reason = outcome.detail or ("could not connect" if outcome.state == UNREACHABLE else "no report")
        return Row(outcome.host, verdict, reason, torch=outcome.torch_label or NONE)
    torch = report.facts.torch or "not installed"
    label = report.request.torch_label or outcome.torch_label
    if label:
        torch = f"{torch} ({label})"
    return Row(
        # judged: PASS and WARN only where the report proves them
        outcome.host, report.verdict.upper(), report.reason,
        torch=torch,
        os=report.host.os or "?",
        rocm=report.facts.rocm or "none",
        bitsandbytes=report.facts.bitsandbytes or "not installed",
        gpus=_gpus(report),
        linkage=_linkage(report),
        strays=_strays(report),
        nf4=_nf4(report),
        problems=tuple(check.line for check in report.problems) + tuple(outcome.drift),
    )


def fleet_counts(rows: Iterable[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return counts


def _counts_line(rows: list[Row]) -> str:
    counts = fleet_counts(rows)
    order = ("PASS", "WARN", "FAIL", "NOT VERIFIED", "UNREACHABLE")
    return ", ".join(f"{counts[k]} {k.lower()}" for k in order if counts.get(k)) or "no hosts"


def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(outcomes: Iterable[HostOutcome], *, title: str, generated_at: str) -> str:
    rows = [row_for(o) for o in outcomes]
    lines = [
        f"# {title}",
        "",
        f"{len(rows)} host(s): {_counts_line(rows)} — written {generated_at}",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for row in rows:
        cells = (row.host, *row.cells[:-1], f"**{row.verdict}**: {row.reason}")
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    details = [row for row in rows if row.problems]
    if details:
        lines += ["", "## What to look at", ""]
        for row in details:
            lines.append(f"- **{_md(row.host)}**")
            lines += [f"  - {_md(problem)}" for problem in row.problems]
    return "\n".join(lines) + "\n"


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem;color:#1d1d1f}
h1{font-size:1.3rem;margin:0 0 .3rem}p.meta{color:#555;margin:0 0 1rem}
table{border-collapse:collapse;font-size:.85rem;width:100%}
th,td{border:1px solid #ccc;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f0f0f3}td.v{font-weight:600;white-space:nowrap}
tr.PASS td.v{background:#d9f2dd;color:#14591f}tr.WARN td.v{background:#fdf0c8;color:#6b4d00}
tr.FAIL td.v{background:#f9d7d5;color:#7a1612}tr.UNREACHABLE td.v,tr.NOTVERIFIED td.v{background:#e4e4e8;color:#333}
td.r{max-width:28rem}ul{font-size:.85rem}li.fail{color:#7a1612}li.warn{color:#6b4d00}
"""


def render_html(outcomes: Iterable[HostOutcome], *, title: str, generated_at: str) -> str:
    rows = [row_for(o) for o in outcomes]
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS[:-1]) + "<th>Verdict</th><th>Reason</th>"
    body = []
    for row in rows:
        cells = "".join(f"<td>{esc(c)}</td>" for c in (row.host, *row.cells[:-1]))
        body.append(
            f'<tr class="{esc(row.verdict.replace(" ", ""))}">{cells}'
            f'<td class="v">{esc(row.verdict)}</td><td class="r">{esc(row.reason)}</td></tr>'
        )
    details = []
    for row in rows:
        if not row.problems:
            continue
        items = "".join(
            f'<li class="{esc(p.split(" ", 1)[0].lower())}">{esc(p)}</li>' for p in row.problems
        )
        details.append(f"<h2>{esc(row.host)}</h2><ul>{items}</ul>")
    details_html = f"<section><h1>What to look at</h1>{''.join(details)}</section>" if details else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{esc(title)}</h1><p class=\"meta\">{len(rows)} host(s): {esc(_counts_line(rows))} — written "
        f"{esc(generated_at)}</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"{details_html}</body></html>\n"
    )
