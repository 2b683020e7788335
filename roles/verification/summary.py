"""The fleet summary, readable at fifty hosts, in its two renderings: reports/summary.md (`markdown_of`) and the
self-contained page reports/summary.html (`html_of`) — the fleet's findings grouped, then counts per check, then one
row per host.

Pure: takes the hosts' rows (each host's row is host_row.py) and returns groups, counts, Markdown and HTML. Read top
down, a summary says:

1. **Findings** — every host in exactly one group, by what explains it best: its most telling failing check (the
   report's own priority, the one its one-line reason names), else its warning, else "unreachable", "not verified"
   or its pass line. "12 hosts ws[05-16]: FAIL linkage.static: libhipblas.so.3 … not found — install ROCm 7.2.4
   (…)". Host names are folded (python-hostlist: ws[05-16]). Under each group, the other findings of its hosts, once
   each, with the hosts that have them.
2. **Checks** — per check, how many hosts pass, warn, fail or skipped it.
3. **Hosts** — one short row per host: verdict and the check behind it (never the long reason again), OS, ROCm,
   torch, bitsandbytes, GPUs and archs, the kernel (and the one that boots next, a failed boot-time check), linkage,
   strays, NF4 error, and as of when.

The page adds what a page can for fifty hosts:
- the hosts' table sorts by any column (a click on its header) and filters as one types (host, verdict, check, OS,
  GPU arch; every word must match); each finding group has a button that shows only its hosts;
- each host's findings, sources, full reason and last boot-time check sit in a collapsed <details>;
- a small strip of the host's last verdicts (oldest first; fleet.py's VerdictHistory keeps them);
- printed: A4 landscape, the filter hidden, every <details> opened, colours kept, rows never split.
It loads nothing: CSS and JavaScript (summary.css, summary.js beside this file) are inlined, and a
Content-Security-Policy forbids every fetch, so the page is the same offline, from a mail attachment or a file share.

A host passes only on a report that proves it, and later results can only make it worse: host_row.py says how.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hostlist

from roles.verification.host_row import COLUMNS, LABEL_MARK, Finding, HostOutcome, Row, row_for

CHECK_STATUSES = ("pass", "warn", "fail", "skip")
# How a group's verdict orders the findings: what needs a person first.
VERDICT_ORDER = ("FAIL", "NOT VERIFIED", "UNREACHABLE", "WARN", "PASS")


@dataclass(frozen=True)
class Group:
    """Hosts whose verdict rests on the same finding."""

    verdict: str
    # what the hosts' verdict rests on: "linkage.static: libhipblas.so.3 … not found …", "could not connect"
    text: str
    rows: tuple[Row, ...]
    also: tuple[tuple[Finding, tuple[str, ...]], ...] = field(default=())  # other findings, and which hosts have them

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(row.host for row in self.rows)

    @property
    def line(self) -> str:
        return f"{self.verdict} {self.text}"


def fold(names: Iterable[str]) -> str:
    """Host names folded the way cluster tools write them: ws1, ws2, ws3, ws7 → "ws[1-3,7]"."""
    names = list(names)
    try:
        return hostlist.collect_hostlist(names)
    except (hostlist.BadHostlist, ValueError, TypeError):  # a name hostlist's grammar cannot carry: listed as is
        return ", ".join(sorted(names))


# --- the fleet -----------------------------------------------------------------------------------------------------


def fleet_counts(rows: Iterable[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return counts


def counts_line(rows: Sequence[Row]) -> str:
    counts = fleet_counts(rows)
    order = ("PASS", "WARN", "FAIL", "NOT VERIFIED", "UNREACHABLE")
    return ", ".join(f"{counts[k]} {k.lower()}" for k in order if counts.get(k)) or "no hosts"


def groups(rows: Sequence[Row]) -> list[Group]:
    """Every host in one group, by what its verdict rests on; failures first, then the larger groups."""
    by_key: dict[tuple, list[Row]] = {}
    for row in rows:
        by_key.setdefault(row.group_key, []).append(row)
    found = []
    for key, members in by_key.items():
        lead = members[0].lead
        if lead is None:
            text = members[0].reason
        else:
            text = f"{lead.check}: {lead.text}" if lead.check else lead.text
        also: dict[tuple, tuple[Finding, list[str]]] = {}
        for row in members:
            for finding in row.findings:
                if finding.key != key:
                    also.setdefault(finding.key, (finding, []))[1].append(row.host)
        ordered = sorted(also.values(), key=lambda item: (item[0].rank, -len(item[1])))
        found.append(
            Group(
                members[0].verdict, text, tuple(members), tuple((finding, tuple(hosts)) for finding, hosts in ordered)
            )
        )
    return sorted(
        found, key=lambda g: (VERDICT_ORDER.index(g.verdict) if g.verdict in VERDICT_ORDER else 9, -len(g.rows), g.text)
    )


def check_counts(rows: Sequence[Row]) -> list[tuple[str, Counter]]:
    """(check id, Counter of statuses) in the order the checks first appear."""
    counts: dict[str, Counter] = {}
    for row in rows:
        for check, status in row.checks:
            counts.setdefault(check, Counter())[status] += 1
    return list(counts.items())


def torch_labels(rows: Sequence[Row]) -> list[tuple[str, tuple[str, ...]]]:
    """(label, hosts) for the torch stand-in labels the table marks with LABEL_MARK."""
    labels: dict[str, list[str]] = {}
    for row in rows:
        if row.torch_label:
            labels.setdefault(row.torch_label, []).append(row.host)
    return [(label, tuple(hosts)) for label, hosts in labels.items()]


def hosts_phrase(hosts: Sequence[str], of: int | None = None) -> str:
    """ "12 hosts ws[05-16]", "1 host ws3"; "all 12" when `of` says the hosts are the whole group."""
    if of is not None and len(hosts) == of and of > 1:
        return f"all {of}"
    return f"{len(hosts)} host{'s' if len(hosts) != 1 else ''} {fold(hosts)}"


# --- Markdown --------------------------------------------------------------------------------------------------------


_CELL = {"\\": "\\\\", "|": "\\|", "\n": " ", "\r": " "}
_MARKDOWN_TEXT = str.maketrans(_CELL | {c: "\\" + c for c in "<>[]!"})
_MARKDOWN_NAMES = str.maketrans(_CELL)


def _md(text: str) -> str:
    """Text from a host as Markdown shows it and nothing more: no table cell ended early (`|`), no HTML
    (`<img onerror>`), no link or image that a viewer would fetch (`![x](http://…)`)."""
    return str(text).translate(_MARKDOWN_TEXT)


def _md_names(text: str) -> str:
    """The inventory's own names (hosts folded as ws[41-52]): kept readable as plain text, only cell-safe."""
    return str(text).translate(_MARKDOWN_NAMES)


def render_markdown(outcomes: Iterable[HostOutcome], *, title: str, generated_at: str) -> str:
    """The Markdown straight from outcomes, for one-off renderings (the tests'); the summary writer uses markdown_of."""
    return markdown_of([row_for(o) for o in outcomes], title=title, generated_at=generated_at)


def markdown_of(rows: Sequence[Row], *, title: str, generated_at: str) -> str:
    """The Markdown of rows already made (the summary writer makes each host's row once for both files)."""
    lines = [
        f"# {title}",
        "",
        f"{len(rows)} host(s): {counts_line(rows)} — written {generated_at}",
        "",
        "## Findings",
        "",
    ]
    for group in groups(rows):
        lines.append(f"- **{_md_names(hosts_phrase(group.hosts))}** — **{group.verdict}** {_md(group.text)}")
        lines += [
            f"  - {_md_names(hosts_phrase(hosts, of=len(group.rows)))}: {_md(finding.line)}"
            for finding, hosts in group.also
        ]
    counted = check_counts(rows)
    if counted:
        lines += [
            "",
            "## Checks",
            "",
            "| Check | " + " | ".join(CHECK_STATUSES) + " |",
            "|---|" + "---:|" * len(CHECK_STATUSES),
        ]
        lines += [
            f"| {_md(check)} | " + " | ".join(str(counts.get(s, 0) or "") for s in CHECK_STATUSES) + " |"
            for check, counts in counted
        ]
    lines += ["", "## Hosts", "", "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for row in rows:
        verdict, *rest = row.cells
        cells = [_md_names(row.host), f"**{verdict}**", *(_md(c) for c in rest)]
        lines.append("| " + " | ".join(cells) + " |")
    for label, hosts in torch_labels(rows):
        lines += ["", f"{LABEL_MARK} torch on {_md_names(hosts_phrase(hosts))}: {_md(label)}"]
    return "\n".join(lines) + "\n"


# --- HTML ------------------------------------------------------------------------------------------------------------

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
    """The page straight from outcomes, for one-off renderings (the tests'); the summary writer uses html_of."""
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
