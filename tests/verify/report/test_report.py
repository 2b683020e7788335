"""verify/report/report.py and verify/report/report_schema.json: the report's shape, its verdict and one-line reason."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from tests.support.verify_runs import cached_check, torch_cpu_venv
from verify.report.report import FAIL, PASS, SKIP, WARN, CheckResult, build_report, headline, load_schema, verdict_of


def _report(checks):
    return build_report(
        host={"hostname": "ws1", "os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0", "machine": "x86_64",
              "python": "3.11.2"},
        request={"venv": "/opt/rocm-fleet/venv", "expect_rocm": "7.2.4", "expect_bitsandbytes": "0.50.1",
                 "device": "auto", "gpu_required": True, "static_only": False, "root": "/"},
        facts={"rocm": "7.2.4-93", "torch": "2.13.0+rocm7.2", "torch_hip": "7.2.53211", "bitsandbytes": "0.50.1",
               "bnb_library": "libbitsandbytes_rocm72.so", "gpus": [], "device_mode": "gpu", "linkage": None,
               "strays": None, "nf4": []},
        checks=checks,
        generated_at="2026-11-29T18:00:00Z",
        tool_version="0.1.0",
    )


def test_verdict_is_the_worst_status_and_skip_does_not_count():
    assert verdict_of([CheckResult("a", "A", PASS, "ok"), CheckResult("b", "B", SKIP, "n/a")]) == PASS
    assert verdict_of([CheckResult("a", "A", WARN, "hm"), CheckResult("b", "B", PASS, "ok")]) == WARN
    assert verdict_of([CheckResult("a", "A", WARN, "hm"), CheckResult("b", "B", FAIL, "no")]) == FAIL


def test_headline_picks_the_linkage_failure_over_later_ones():
    checks = [
        CheckResult("runtime.bnb_library", "x", FAIL, "mock library"),
        CheckResult("versions.rocm", "x", FAIL, "no system ROCm"),
        CheckResult("linkage.static", "x", FAIL, "libhipblas.so.3 not found"),
    ]
    assert headline(checks) == "linkage.static: libhipblas.so.3 not found; 2 more check(s) failed"
    assert headline([CheckResult("nf4.cuda0", "x", WARN, "slow")]).startswith("passed with warnings — nf4.cuda0")
    assert headline([CheckResult("a", "x", PASS, "ok")]) == "all 1 checks passed"


def test_a_reason_is_always_one_line():
    assert CheckResult("a", "A", FAIL, "first\nsecond  line").reason == "first second line"
    with pytest.raises(ValueError, match="status 'bad'"):
        CheckResult("a", "A", "bad", "x")


def test_built_report_matches_the_schema_and_the_schema_rejects_what_it_should():
    schema = load_schema()
    report = _report([CheckResult("linkage.static", "static linkage", PASS, "ok", {"paths": ("a", "b")})])
    jsonschema.validate(report, schema)
    assert report["checks"][0]["evidence"] == {"paths": ["a", "b"]}
    for mutate in (
        lambda r: r.update(schema_version=2),
        lambda r: r["checks"][0].update(status="ok"),
        lambda r: r["checks"][0].update(reason="two\nlines"),
        lambda r: r.update(checks=[]),
        lambda r: r["request"].update(expect_rocm="7.2"),
        lambda r: r.pop("facts"),
    ):
        broken = copy.deepcopy(report)
        mutate(broken)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


@pytest.mark.slow
def test_real_reports_match_the_schema():
    for standin in (None, "torch_reports_hip"):
        report, done = cached_check(torch_cpu_venv(), "--device", "cpu", standin=standin) if standin is None \
            else cached_check(torch_cpu_venv(), standin=standin)
        assert report is not None, done.stderr
        jsonschema.validate(report, load_schema())
