"""roles/verification/summary.py's page judged in a real browser: Debian's headless Chromium (tests/support/browser.py)
loads the page for a synthetic fleet of 60 hosts of four kinds — 40 pass, 12 without ROCm, 5 with a stray package,
3 unreachable (tests/support/fleet_reports.py: reports built as the verifier builds them, not run) — and the test
asserts on what a person sees after the page has loaded: four finding groups, the filter (typed into, key by key),
the group buttons, sorting, collapsed details, the history strip, the printed form, and that nothing was fetched.
The screenshots and the printed PDF are kept in the test's tmp dir.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from roles.verification.summary import render_html
from tests.support.browser import Browser
from tests.support.fleet_reports import fleet_of

pytestmark = pytest.mark.slow

VISIBLE_HOSTS = (
    "return [...document.querySelectorAll('#hosts-table tbody tr')].filter(r => !r.hidden)"
    ".map(r => r.cells[0].textContent)"
)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    outcomes = fleet_of(pass_=40, no_rocm=12, strays=5, unreachable=3)
    # ws41 failed its last two runs after three passes: its strip shows that.
    history = (
        ("PASS", "2026-11-27T17:00:00Z"),
        ("PASS", "2026-11-28T17:00:00Z"),
        ("PASS", "2026-11-29T17:00:00Z"),
        ("FAIL", "2026-11-30T17:00:00Z"),
        ("FAIL", "2026-12-01T17:00:00Z"),
    )
    outcomes = [replace(o, history=history) if o.host == "ws41" else o for o in outcomes]
    directory = tmp_path_factory.mktemp("page")
    path = directory / "summary.html"
    path.write_text(render_html(outcomes, title="Lab fleet", generated_at="2026-12-01 17:05:00 UTC"), encoding="utf-8")
    with Browser.start(directory) as browser:
        browser.open(path)
        yield browser, directory


def test_four_groups_come_first_with_their_hosts_folded(page):
    browser, directory = page
    groups = browser.script(
        "return [...document.querySelectorAll('#findings .group')].map(g => [g.querySelector("
        "'.count').textContent, g.querySelector('.badge').textContent, g.querySelector('.hosts')"
        ".textContent, g.querySelector('.line').textContent])"
    )
    assert [g[:3] for g in groups] == [
        ["12 hosts", "FAIL", "ws[41-52]"],
        ["5 hosts", "FAIL", "ws[53-57]"],
        ["3 hosts", "UNREACHABLE", "ws[58-60]"],
        ["40 hosts", "PASS", "ws[01-40]"],
    ]
    assert groups[0][3].startswith("linkage.static: libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found")
    assert groups[1][3].startswith("strays: 1 distro ROCm package(s): libamdhip64-5")
    # The findings are above the checks' counts, which are above the hosts' table.
    order = browser.script("return [...document.querySelectorAll('section')].map(s => s.id)")
    assert order == ["findings", "checks", "hosts"]
    assert browser.script("return document.querySelector('header p.meta').textContent").startswith(
        "60 host(s): 40 pass, 17 fail, 3 unreachable"
    )
    browser.screenshot(directory / "summary.png")


def test_typing_into_the_filter_shows_only_the_matching_rows(page):
    browser, directory = page
    assert len(browser.script(VISIBLE_HOSTS)) == 60
    browser.type_into("#filter", "gfx90a")  # a GPU arch: every fifth reachable host
    assert browser.script(VISIBLE_HOSTS) == [f"ws{n:02d}" for n in range(5, 58, 5)]
    assert browser.script("return document.getElementById('shown').textContent") == "11 of 60 hosts"
    browser.screenshot(directory / "filtered-gfx90a.png")
    browser.clear("#filter")
    browser.type_into("#filter", "fail strays")  # every word must match: verdict and check
    assert browser.script(VISIBLE_HOSTS) == [f"ws{n}" for n in range(53, 58)]
    browser.clear("#filter")
    browser.type_into("#filter", "WS07")  # case does not matter
    assert browser.script(VISIBLE_HOSTS) == ["ws07"]
    browser.type_into("#filter", "\ue003" * 4)  # Backspace, key by key: "WS07" → ""
    assert len(browser.script(VISIBLE_HOSTS)) == 60
    browser.type_into("#filter", "no-such-host")
    assert browser.script(VISIBLE_HOSTS) == []
    browser.clear("#filter")  # emptied at once
    assert len(browser.script(VISIBLE_HOSTS)) == 60


def test_a_groups_button_shows_its_hosts(page):
    browser, _ = page
    browser.click("#findings .group:nth-of-type(3) button")  # the unreachable ones
    assert browser.script(VISIBLE_HOSTS) == ["ws58", "ws59", "ws60"]
    assert browser.script("return document.getElementById('filter').value").startswith("group:")
    browser.clear("#filter")
    assert len(browser.script(VISIBLE_HOSTS)) == 60


def test_a_click_on_a_header_sorts_the_table(page):
    browser, _ = page
    browser.click("#hosts-table th:nth-child(2)")  # Verdict: failures first (by severity, not alphabetically)
    verdicts = browser.script(
        "return [...document.querySelectorAll('#hosts-table tbody tr')].map(r => r.cells[1].textContent)"
    )
    assert verdicts == ["FAIL"] * 17 + ["UNREACHABLE"] * 3 + ["PASS"] * 40
    browser.click("#hosts-table th:nth-child(1)")  # Host, ascending
    browser.click("#hosts-table th:nth-child(1)")  # and descending
    hosts = browser.script(
        "return [...document.querySelectorAll('#hosts-table tbody tr')].map(r => r.cells[0].textContent)"
    )
    assert hosts == [f"ws{n:02d}" for n in range(60, 0, -1)]


def test_each_hosts_details_are_collapsed_and_open_on_a_click(page):
    browser, _ = page
    state = browser.script("return [...document.querySelectorAll('#hosts-table tbody details')].map(d => d.open)")
    assert state == [False] * 60
    row = "#hosts-table tbody tr:has(td.host:first-child)"
    browser.script(
        "document.getElementById('filter').value = 'ws41';"
        "document.getElementById('filter').dispatchEvent(new Event('input'))"
    )
    browser.click(f"{row}:not([hidden]) details summary")
    text = browser.script(
        "return [...document.querySelectorAll('#hosts-table tbody tr')].find(r => !r.hidden)"
        ".querySelector('details').innerText"
    )
    assert "FAIL linkage.static: libhipblas.so.3" in text and "FAIL versions.rocm: no system ROCm" in text
    strip = browser.script(
        "return [...[...document.querySelectorAll('#hosts-table tbody tr')].find(r => !r.hidden)"
        ".querySelectorAll('.strip i')].map(i => i.className + ' ' + i.title)"
    )
    assert strip == [
        "h PASS 2026-11-27T17:00:00Z: PASS",
        "h PASS 2026-11-28T17:00:00Z: PASS",
        "h PASS 2026-11-29T17:00:00Z: PASS",
        "h FAIL 2026-11-30T17:00:00Z: FAIL",
        "h FAIL 2026-12-01T17:00:00Z: FAIL",
    ]


def test_printed_the_filter_is_hidden_and_every_details_opens(page):
    browser, directory = page
    opened = "return [...document.querySelectorAll('details')].filter(d => d.open).length"
    before = browser.script(opened)
    browser.emulate_media("print")
    try:
        assert browser.script("return getComputedStyle(document.querySelector('.tools')).display") == "none"
        browser.script("window.dispatchEvent(new Event('beforeprint'))")  # what the browser does before printing
        assert browser.script(opened) == 60
        browser.screenshot(directory / "printed.png")
        browser.script("window.dispatchEvent(new Event('afterprint'))")
        assert browser.script(opened) == before  # those the person had opened stay open
    finally:
        browser.emulate_media("")
    # Chromium's own printing (WebDriver's Print Page) gives a PDF.
    assert browser.print_pdf(directory / "summary.pdf").read_bytes().startswith(b"%PDF")


def test_the_page_fetched_nothing_and_logged_no_error(page):
    browser, _ = page
    assert browser.script("return performance.getEntriesByType('resource').length") == 0
    external = browser.script("return [...document.querySelectorAll('[src],[href],link')].length")
    assert external == 0
    errors = [entry for entry in browser.console() if entry.get("level") == "SEVERE"]
    assert errors == []
