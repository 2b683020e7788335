"""roles/verification/summary.py: the fleet summary, rendered from real reports and from a
synthetic fleet of sixty.

The real reports come from the real verifier: on the torch-cpu venv (fails: no system ROCm), with the HIP stand-in
(the mock-library fallback), and on stand-in workstation images (tests/support/standin_rocm.py) that pass and warn.
The synthetic fleet (tests/support/fleet_reports.py) is built as the verifier builds reports, for what only a large
fleet shows: grouping, folding, counts. The page in a real browser: test_summary_page.py.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from roles.verification.host_row import COLUMNS, NOT_VERIFIED, UNREACHABLE, VERIFIED, HostOutcome, row_for
from roles.verification.summary import CSP, check_counts, fold, groups, render_html, render_markdown
from tests.support.fleet_reports import NO_HIPBLAS, STRAY, fleet_of
from tests.support.standin_rocm import StandinImage
from tests.support.verify_runs import cached_check, run_check_root, torch_cpu_venv
from verify.report.report import Report

LABEL = "torch 2.13.0 CPU, stand-in for the ROCm wheel"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[HostOutcome]:
    cpu, _ = cached_check(torch_cpu_venv(), "--device", "cpu")
    mocked, _ = cached_check(torch_cpu_venv(), standin="torch_reports_hip")
    provisioned = StandinImage(tmp_path_factory.mktemp("provisioned") / "image")
    provisioned.torch()
    provisioned.bitsandbytes()
    provisioned.system_rocm()
    passed, _ = run_check_root(provisioned.root)
    mixed = StandinImage(tmp_path_factory.mktemp("mixed") / "image")
    mixed.torch(bundled_sonames="bare")
    mixed.bitsandbytes()
    mixed.system_rocm()
    warned, _ = run_check_root(mixed.root)
    read = Report.from_json  # as the verification stage reads each host's output
    return [
        HostOutcome("ws1", VERIFIED, read(cpu), torch_label=LABEL),
        HostOutcome("ws|2", VERIFIED, read(mocked)),
        HostOutcome("ws3", VERIFIED, read(passed)),
        HostOutcome("ws4", VERIFIED, read(warned)),
        HostOutcome("ws5", UNREACHABLE, detail="could not connect"),
        HostOutcome("ws6", NOT_VERIFIED, detail="failed at 'Preflight | stop: unsupported OS'"),
    ]


@pytest.mark.slow
def test_one_row_per_host_with_the_columns_a_person_needs(outcomes):
    rows = {row.host: row for row in map(row_for, outcomes)}
    assert [r.verdict for r in rows.values()] == ["FAIL", "FAIL", "PASS", "WARN", "UNREACHABLE", "NOT VERIFIED"]
    ws1 = dict(zip(COLUMNS[1:], rows["ws1"].cells))
    assert ws1["Verdict"] == "FAIL" and ws1["Check"].startswith("linkage.static +")
    assert ws1["torch"] == "2.13.0+cpu †" and rows["ws1"].torch_label == LABEL
    assert ws1["ROCm"] == "none" and ws1["bitsandbytes"] == "0.50.1"
    assert ws1["GPUs (arch)"] == "none (CPU run)"
    assert ws1["Linkage"] == "FAIL: libhipblas.so.3 not found, libhipblaslt.so.1 not found"
    assert ws1["NF4 error"].startswith("cpu 0.07") and ws1["NF4 error"].endswith("(CPU, not a GPU pass)")
    assert ws1["Strays"] == "none"
    assert rows["ws1"].reason.startswith("linkage.static: libhipblas.so.3 (needed by libbitsandbytes_rocm72.so)")
    assert rows["ws1"].lead.line.startswith("FAIL linkage.static: libhipblas.so.3")
    ws2 = dict(zip(COLUMNS[1:], rows["ws|2"].cells))
    assert ws2["GPUs (arch)"] == "1 (gfx1100)" and rows["ws|2"].archs == ("gfx1100",)
    assert any("mock library" in p for p in rows["ws|2"].problems)
    ws3 = dict(zip(COLUMNS[1:], rows["ws3"].cells))
    assert ws3["ROCm"] == "7.2.4-93" and ws3["Linkage"] == "PASS: bitsandbytes' ROCm libraries from torch/lib"
    assert ws3["GPUs (arch)"] == "not probed" and rows["ws3"].problems == () and ws3["Check"] == "—"
    assert rows["ws4"].reason.startswith("passed with warnings — linkage.static: two copies of")
    assert rows["ws4"].lead.status == "WARN"
    assert rows["ws6"].reason == "failed at 'Preflight | stop: unsupported OS'"


@pytest.mark.slow
def test_markdown_says_findings_then_checks_then_hosts_with_escaped_cells(outcomes):
    text = render_markdown(outcomes, title="Lab fleet", generated_at="2026-11-29 18:00:00 UTC")
    lines = text.splitlines()
    assert lines[0] == "# Lab fleet"
    assert (
        lines[2] == "6 host(s): 1 pass, 1 warn, 2 fail, 1 not verified, 1 unreachable — written 2026-11-29 18:00:00 UTC"
    )
    assert [line for line in lines if line.startswith("## ")] == ["## Findings", "## Checks", "## Hosts"]
    hosts = lines[lines.index("## Hosts") :]
    table = [line for line in hosts if line.startswith("|")]
    assert len(table) == 2 + len(outcomes)
    # Every row has exactly the columns of the header: a '|' in a host name is escaped, not a new cell.
    cells = [len(line.replace("\\|", "").split("|")) for line in table]
    assert len(set(cells)) == 1 and "ws\\|2" in text
    assert "| ws5 | **UNREACHABLE** | — |" in text
    findings = lines[lines.index("## Findings") : lines.index("## Checks")]
    assert "- **1 host ws5** — **UNREACHABLE** could not connect" in findings
    assert "- **1 host ws6** — **NOT VERIFIED** failed at 'Preflight \\| stop: unsupported OS'" in findings
    assert f"† torch on 1 host ws1: {LABEL}" in text


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.slow
def test_html_is_one_self_contained_page(outcomes):
    page = render_html(outcomes, title="Lab <fleet>", generated_at="2026-11-29 18:00:00 UTC")
    parsed = _Page()
    parsed.feed(page)
    tags = [tag for tag, _ in parsed.tags]
    # One table row per host in the hosts' table, and the checks' table.
    rows = [attrs for tag, attrs in parsed.tags if tag == "tr" and "data-search" in attrs]
    assert len(rows) == len(outcomes)
    # No external assets: the one script and style are inline, no stylesheet, image or frame is pulled in, no URL in
    # any attribute, and the page's own policy forbids every fetch.
    assert tags.count("script") == 1 and not {"link", "img", "iframe", "object"} & set(tags)
    assert not any(("src" in attrs or "href" in attrs) for _, attrs in parsed.tags)
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in parsed.tags
    assert CSP.startswith("default-src 'none';")
    assert "Lab <fleet>" in "".join(parsed.text) and "<fleet>" not in page  # escaped
    assert [attrs["class"] for attrs in rows] == ["FAIL", "FAIL", "PASS", "WARN", "UNREACHABLE", "NOTVERIFIED"]
    # Each host's details are collapsed.
    assert tags.count("details") == len(outcomes) and not any("open" in a for t, a in parsed.tags if t == "details")


# --- fifty hosts: the same reason once, grouped ---------------------------------------------------------------------


def test_a_reason_shared_by_many_hosts_is_written_once_with_the_hosts_folded():
    """Twelve hosts fail for the same long reason: the Markdown says it once, with ws[41-52], not twelve times."""
    text = render_markdown(fleet_of(), title="Lab", generated_at="now")
    assert text.count(NO_HIPBLAS) == 1 and text.count(STRAY) == 1
    assert f"- **12 hosts ws[41-52]** — **FAIL** linkage.static: {NO_HIPBLAS}" in text
    assert "  - all 12: FAIL versions.rocm: no system ROCm" in text
    # The table's rows are short: the check the verdict rests on, not its reason.
    assert "| ws41 | **FAIL** | linkage.static +1 | Ubuntu 24.04.3 LTS |" in text
    assert "| ws53 | **FAIL** | strays | " in text and "| ws01 | **PASS** | — | " in text


def test_groups_partition_the_fleet_failures_first_then_the_larger():
    found = groups([row_for(o) for o in fleet_of()])
    assert [(g.verdict, len(g.rows), fold(g.hosts)) for g in found] == [
        ("FAIL", 12, "ws[41-52]"),
        ("FAIL", 5, "ws[53-57]"),
        ("UNREACHABLE", 3, "ws[58-60]"),
        ("PASS", 40, "ws[01-40]"),
    ]
    assert found[0].text == f"linkage.static: {NO_HIPBLAS}" and found[3].text == "all 18 checks passed"
    assert sum(len(g.rows) for g in found) == 60


def test_counts_per_check():
    counts = dict(check_counts([row_for(o) for o in fleet_of()]))
    assert counts["linkage.static"] == {"pass": 45, "fail": 12}
    assert counts["strays"] == {"pass": 52, "fail": 5}
    assert counts["nf4.cuda0"] == {"pass": 57}
    # The day-2 checks are counted like every other (the fleet's reports are schema 2).
    for check in ("environment.loader", "apt.pin", "apt.lists", "kernel.driver", "kernel.next_boot"):
        assert counts[check] == {"pass": 57}, check


def test_host_names_are_folded_the_way_cluster_tools_write_them():
    assert fold(["ws1", "ws2", "ws3", "ws7"]) == "ws[1-3,7]"
    assert fold(["ws-ml-01.lab.example.org", "ws-ml-02.lab.example.org"]) == "ws-ml-[01-02].lab.example.org"
    assert fold(["ws[1", "ws2"]) == "ws2, ws[1"  # a name the hostlist grammar cannot carry is listed as it is
