"""The fleet summary as one self-contained HTML page: the same three parts as the Markdown (summary.py) — findings
grouped, counts per check, the hosts — with what a page can add for fifty hosts:

- the hosts' table sorts by any column (a click on its header) and filters as one types (host, verdict, check, OS,
  GPU arch; every word must match); each finding group has a button that shows only its hosts;
- each host's findings, sources, full reason and last boot-time check sit in a collapsed <details>;
- a small strip of the host's last verdicts (oldest first; fleet.py's VerdictHistory keeps them);
- printed: A4 landscape, the filter hidden, every <details> opened, colours kept, rows never split.

It loads nothing: CSS and JavaScript (summary.css, summary.js beside this file) are inlined, and a
Content-Security-Policy forbids every fetch, so the page is the same offline, from a mail attachment or a file share.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path

from roles.verification.host_row import COLUMNS, LABEL_MARK, HostOutcome, Row, row_for
from roles.verification.summary import (
    CHECK_STATUSES,
    VERDICT_ORDER,
    check_counts,
    counts_line,
    fold,
    groups,
    hosts_phrase,
    torch_labels,
)

_HERE = Path(__file__).resolve().parent
# Nothing may be fetched: inline style and script only (the page's own), images only as data: URLs.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
esc = html.escape


def _asset(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def _css_class(verdict: str) -> str:
    return verdict.replace(" ", "")


def _findings_section(rows: list[Row]) -> tuple[str, dict[str, str]]:
    """The findings' HTML, and each host's group id (what the rows carry for the group buttons)."""
    parts, group_of = [], {}
    for number, group in enumerate(groups(rows), start=1):
        gid = f"g{number}"
        for host in group.hosts:
            group_of[host] = gid
        also = "".join(
            f'<li class="{esc(finding.status)}">{esc(hosts_phrase(hosts, of=len(group.rows)))}: '
            f"{esc(finding.line)}</li>"
            for finding, hosts in group.also
        )
        count = f"{len(group.rows)} host{'s' if len(group.rows) != 1 else ''}"
        parts.append(
            f'<div class="group {_css_class(group.verdict)}" data-group="{gid}">'
            f'<p><span class="count">{count}</span> <span class="badge">{esc(group.verdict)}</span> '
            f'<span class="line">{esc(group.text)}</span>'
            f'<button type="button" data-group="{gid}">show these hosts</button></p>'
            f'<p class="hosts">{esc(fold(group.hosts))}</p>' + (f"<ul>{also}</ul>" if also else "") + "</div>"
        )
    return f'<section id="findings"><h2>Findings</h2>{"".join(parts)}</section>', group_of


def _checks_section(rows: list[Row]) -> str:
    counted = check_counts(rows)
    if not counted:
        return ""
    head = "".join(f"<th>{esc(s)}</th>" for s in CHECK_STATUSES)
    body = "".join(
        f"<tr><td>{esc(check)}</td>"
        + "".join(f'<td class="num">{counts.get(s, 0) or ""}</td>' for s in CHECK_STATUSES)
        + "</tr>"
        for check, counts in counted
    )
    return (
        f'<section id="checks"><h2>Checks</h2><table class="counts"><thead><tr><th>Check</th>{head}</tr>'
        f"</thead><tbody>{body}</tbody></table></section>"
    )


def _strip(row: Row) -> str:
    marks = "".join(
        f'<i class="h {_css_class(verdict)}" title="{esc(when)}: {esc(verdict)}"></i>' for verdict, when in row.history
    )
    return f'<span class="strip" aria-label="last verdicts, oldest first">{marks}</span>'


def _details(row: Row) -> str:
    items = "".join(
        f'<li class="{esc(f.status)}">{esc(f.line)}'
        + (f" <em>({esc(', '.join(f.sources))})</em>" if f.sources else "")
        + "</li>"
        for f in row.findings
    )
    sources = "".join(f"<li>{esc(line)}</li>" for line in row.sources)
    boot = f'<p class="boot">{esc(row.boot)}</p>' if row.boot else ""
    what = f"{len(row.findings)} finding{'s' if len(row.findings) != 1 else ''}" if row.findings else "details"
    reason = "" if row.findings else f"<p>{esc(row.reason)}</p>"  # else the findings say it, each once
    return (
        f"<details><summary>{what}</summary>{reason}{boot}"
        + (f"<ul>{items}</ul>" if items else "")
        + (f"<p>Read on the host:</p><ul>{sources}</ul>" if sources else "")
        + "</details>"
    )


def _row(row: Row, group: str) -> str:
    search = " ".join(
        [row.host, row.verdict, row.os, *row.archs, *(f.check or "" for f in row.findings), f"group:{group}"]
    ).lower()
    rank = VERDICT_ORDER.index(row.verdict) if row.verdict in VERDICT_ORDER else len(VERDICT_ORDER)
    cells = [f'<td class="host">{esc(row.host)}</td>']
    for column, text in zip(COLUMNS[1:], row.cells):
        attributes = {
            "Verdict": f' class="v" data-key="{rank}"',
            "Kernel": ' class="wrap"',
            "Linkage": ' class="wrap"',
            "Strays": ' class="wrap"',
        }.get(column, "")
        cells.append(f"<td{attributes}>{esc(text)}</td>")
    cells += [f"<td>{_strip(row)}</td>", f'<td class="wrap">{_details(row)}</td>']
    return f'<tr class="{_css_class(row.verdict)}" data-search="{esc(search)}">{"".join(cells)}</tr>'


def render_html(outcomes: Iterable[HostOutcome], *, title: str, generated_at: str) -> str:
    return html_of([row_for(o) for o in outcomes], title=title, generated_at=generated_at)


def html_of(rows: Sequence[Row], *, title: str, generated_at: str) -> str:
    """The page of rows already made (the summary writer makes each host's row once for both files)."""
    rows = list(rows)
    findings, group_of = _findings_section(rows)
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS) + "<th>History</th><th data-nosort>Details</th>"
    body = "".join(_row(row, group_of.get(row.host, "")) for row in rows)
    notes = "".join(
        f'<p class="notes">{LABEL_MARK} torch on {esc(hosts_phrase(hosts))}: {esc(label)}</p>'
        for label, hosts in torch_labels(rows)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_asset('summary.css')}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><p class="meta">{len(rows)} host(s): {esc(counts_line(rows))} — written '
        f"{esc(generated_at)}</p></header>"
        f"{findings}{_checks_section(rows)}"
        '<section id="hosts"><h2>Hosts</h2><p class="tools"><label>Filter '
        '<input id="filter" type="search" autocomplete="off" placeholder="host, verdict, check, OS, GPU arch">'
        '</label><span id="shown"></span></p>'
        f'<table id="hosts-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}</section>'
        f"<script>{_asset('summary.js')}</script></body></html>\n"
    )
