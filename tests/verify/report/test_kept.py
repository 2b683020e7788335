"""verify/report/kept.py: the results a host keeps, read back typed — and everything else refused with one line."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.support.report_samples import sample
from verify.report.hook_state import HookResult
from verify.report.kept import KeptResult, Unusable, kept_result, kept_results, parse_time
from verify.report.report import FAIL


def entry(document, path="/var/lib/rocm-fleet/x.json") -> dict:
    return {"path": path, "text": document if isinstance(document, str) else json.dumps(document), "mtime": 0.0}


def test_a_kept_report_and_the_results_wrapping_one_are_read_through_the_report_reader():
    report = sample()
    found = kept_result("verification", entry(report.to_json()))
    assert isinstance(found, KeptResult) and found.report == report and found.checked_at == report.generated_at
    assert found.full and found.label == "verification"
    static = replace(report, request=replace(report.request, static_only=True), document=None)
    hook = HookResult("2026-12-01T19:00:00Z", static).to_json()  # what the apt hook really writes
    found = kept_result("apt_hook", entry(hook))
    assert found.checked_at == "2026-12-01T19:00:00Z" and not found.full and found.label == "apt hook"
    # The boot check's result (its own branch): the same shape, its own kind.
    boot = {
        "kind": "rocm-fleet.boot-check-result",
        "version": 1,
        "boot_id": "b",
        "kernel": "6.8.0-51-generic",
        "previous_kernel": None,
        "checked_at": "2026-12-01T08:00:00Z",
        "report": report.to_json(),
    }
    found = kept_result("boot_check", entry(boot))
    assert found.full and found.timestamp == parse_time("2026-12-01T08:00:00Z")


def test_what_is_not_a_report_is_unusable_with_one_line():
    report = sample().to_json()
    cases = {
        "{cut off": "not JSON: ",
        "[]": "not a JSON object",
        json.dumps({"kind": "something-else"}): "kind 'something-else' is not a report",
        json.dumps(dict(report, schema_version=99)): "report schema_version 99 is not one this checkout reads",
        json.dumps(dict(report, verdict="great")): "verdict 'great' is not one of",
    }
    for text, why in cases.items():
        found = kept_result("verification", entry(text))
        assert isinstance(found, Unusable) and found.why.startswith(why), (text, found)
        assert found.line.startswith("/var/lib/rocm-fleet/x.json cannot be used (")
        assert found.line.endswith("it proves nothing — pyinfra INVENTORY tasks/verify.py replaces it")
    # An apt hook result where the verification's report belongs (and the other way round) is not taken for it.
    hook = HookResult("2026-12-01T19:00:00Z", sample()).to_json()
    assert isinstance(kept_result("verification", entry(hook)), Unusable)
    assert isinstance(kept_result("boot_check", entry(hook)), Unusable)
    # What the host said it could not read.
    found = kept_result("apt_hook", {"path": "/p", "error": "/p is a FIFO, not a regular file: not read"})
    assert found.why == "/p is a FIFO, not a regular file: not read" and "the next dpkg run replaces it" in found.line
    assert kept_result("boot_check", {"path": "/p", "missing": True}) is None


def test_one_hosts_answer():
    report = sample({"strays": FAIL})
    results, unusable, now = kept_results(
        {
            "now": 1764608400.5,
            "files": {
                "verification": entry(report.to_json()),
                "apt_hook": entry("nonsense"),
                "boot_check": {"missing": True},
            },
        }
    )
    assert list(results) == ["verification"] and results["verification"].report.verdict == FAIL
    assert [u.source for u in unusable] == ["apt_hook"] and now == 1764608400.5
    results, unusable, now = kept_results({"error": "python3: not found"})
    assert results == {} and len(unusable) == 1 and now is None
    assert kept_results({"files": {}, "now": True})[2] is None  # a bool is not a time


def test_times():
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time("yesterday") is None and parse_time(None) is None
