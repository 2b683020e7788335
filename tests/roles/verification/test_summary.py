"""roles/verification/summary.py: the fleet summary, rendered from real reports.

The reports come from the real verifier: on the torch-cpu venv (fails: no system ROCm), with the HIP stand-in (the
mock-library fallback), and on stand-in workstation images (tests/support/standin_rocm.py) that pass and warn.
"""

from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser

import pytest

from roles.verification.summary import (
    COLUMNS,
    NOT_VERIFIED,
    UNREACHABLE,
    VERIFIED,
    HostOutcome,
    render_html,
    render_markdown,
    row_for,
)
from tests.support.report_samples import FACTS, edited, sample, sample_report
from tests.support.standin_rocm import StandinImage
from tests.support.verify_runs import cached_check, run_check_root, torch_cpu_venv
from verify.report.report import Report, StraysFacts

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
    assert ws1["torch"] == f"2.13.0+cpu ({LABEL})"
    assert ws1["ROCm"] == "none" and ws1["bitsandbytes"] == "0.50.1"
    assert ws1["GPUs (arch)"] == "none (CPU run)"
    assert ws1["Linkage"] == "FAIL: libhipblas.so.3 not found, libhipblaslt.so.1 not found"
    assert ws1["NF4 error"].startswith("cpu 0.07") and ws1["NF4 error"].endswith("(CPU, not a GPU pass)")
    assert ws1["Strays"] == "none"
    assert rows["ws1"].reason.startswith("linkage.static: libhipblas.so.3 (needed by libbitsandbytes_rocm72.so)")
    ws2 = dict(zip(COLUMNS[1:], rows["ws|2"].cells))
    assert ws2["GPUs (arch)"] == "1 (gfx1100)"
    assert any("mock library" in p for p in rows["ws|2"].problems)
    ws3 = dict(zip(COLUMNS[1:], rows["ws3"].cells))
    assert ws3["ROCm"] == "7.2.4-93" and ws3["Linkage"] == "PASS: bitsandbytes' ROCm libraries from torch/lib"
    assert ws3["GPUs (arch)"] == "not probed" and rows["ws3"].problems == ()
    assert rows["ws4"].reason.startswith("passed with warnings — linkage.static: two copies of")
    assert rows["ws6"].reason == "failed at 'Preflight | stop: unsupported OS'"


@pytest.mark.slow
def test_markdown_is_a_table_with_escaped_cells_and_a_list_of_what_to_look_at(outcomes):
    text = render_markdown(outcomes, title="Lab fleet", generated_at="2026-11-29 18:00:00 UTC")
    lines = text.splitlines()
    assert lines[0] == "# Lab fleet"
    assert lines[2] == "6 host(s): 1 pass, 1 warn, 2 fail, 1 not verified, 1 unreachable — written 2026-11-29 18:00:00 UTC"
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + len(outcomes)
    # Every row has exactly the columns of the header: a '|' in a host name is escaped, not a new cell.
    cells = [len(line.replace("\\|", "").split("|")) for line in table]
    assert len(set(cells)) == 1 and "ws\\|2" in text
    assert "| ws5 | — |" in text and "**UNREACHABLE**: could not connect" in text
    after = lines[lines.index("## What to look at"):]
    assert "- **ws1**" in after and "- **ws3**" not in after


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
    assert tags.count("tr") == 1 + len(outcomes)
    # No external assets: no scripts, stylesheets, images or frames pulled in, no URL in any attribute.
    assert not {"script", "link", "img", "iframe", "object"} & set(tags)
    assert not any(("src" in attrs or "href" in attrs) for _, attrs in parsed.tags)
    assert "Lab <fleet>" in "".join(parsed.text) and "<fleet>" not in page  # escaped
    classes = [attrs.get("class") for tag, attrs in parsed.tags if tag == "tr" and attrs.get("class")]
    assert classes == ["FAIL", "FAIL", "PASS", "WARN", "UNREACHABLE", "NOTVERIFIED"]


def test_strays_that_could_bind_are_never_hidden_behind_the_cut():
    """Seven strays as Debian 12 really pulls them in (alphabetical, the two binding risks last): the row names the
    risky ones first, marked, and counts the rest."""
    packages = ["libamd-comgr2", "libamdhip64-5", "libhsakmt1", "librocsparse0", "libdrm-amdgpu1x",
                "libhsa-runtime64-1", "librocm-smi64-1"]
    risky = ["libhsa-runtime64-1", "librocm-smi64-1"]
    strays = StraysFacts(7, tuple(packages), tuple(risky))
    report = replace(sample({"strays": "warn"}), facts=replace(FACTS, strays=strays))
    cell = row_for(HostOutcome("ws1", VERIFIED, report)).cells[COLUMNS.index("Strays") - 1]
    assert cell.startswith("7: libhsa-runtime64-1 ⚠, librocm-smi64-1 ⚠, ") and cell.endswith(" +3"), cell


@pytest.mark.parametrize("change, words", [
    (lambda r: r.update(verdict="pass"), "not proven — the report's verdict 'pass' is not what its checks give"),
    (lambda r: r.update(checks=[c for c in r["checks"] if c["status"] != "fail"]),
     "not proven — the report's verdict 'fail' is not what its checks give"),
])
def test_a_report_that_does_not_prove_its_verdict_is_not_shown_as_one(change, words):
    """The summary shows PASS or WARN only where verify/report/report.py's rule says the report proves it. (A
    document that does not match the schema never becomes a Report to show: Report.from_json refuses it.)"""
    report = Report.from_json(edited(sample_report({"linkage.static": "fail"}), change))
    row = row_for(HostOutcome("ws1", VERIFIED, report))
    assert row.verdict == "NOT VERIFIED" and row.reason.startswith(words), row
    assert "NOT VERIFIED" in render_markdown([HostOutcome("ws1", VERIFIED, report)], title="t", generated_at="now")
