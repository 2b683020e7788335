"""verify/report/report.py and verify/report/report_schema.json: the report's shape, its verdict and one-line reason."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace

import jsonschema
import pytest

from tests.support.reports import FACTS, built_report
from tests.support.verify_runs import cached_check, torch_cpu_venv
from verify.report.report import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    CheckResult,
    Gpu,
    Nf4Run,
    Report,
    ReportError,
    StatusLine,
    StraysFacts,
    headline,
    load_schema,
    verdict_of,
)


def _report(checks):
    return built_report(checks).to_json()


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
        lambda r: r.update(schema_version=3),
        lambda r: r.update(schema_version=1),  # a new report is version 2: its new facts are required
        lambda r: r["facts"].pop("kernel"),
        lambda r: r["facts"].update(boot_check={"boot_id": "x"}),
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


def test_what_the_schema_accepts_every_reader_reads_back_whole_and_typed():
    full = replace(FACTS, gpus=(Gpu(0, "AMD Radeon RX 7900 XT", "gfx1100", True),),
                   linkage=StatusLine(FAIL, "libhipblas.so.3 not found", "libhipblas.so.3 not found"),
                   strays=StraysFacts(1, ("librocm-smi64-1",), ("librocm-smi64-1",)),
                   nf4=(Nf4Run("cuda:0", PASS, 0.0729, True),))
    built = replace(built_report([CheckResult("linkage.static", "static linkage", FAIL, "not found",
                                              {"missing": ["libhipblas.so.3 (needed by …) not found"]})]),
                    facts=full)
    document = json.loads(json.dumps(built.to_json()))
    jsonschema.validate(document, load_schema())
    read = Report.from_json(document)
    assert read == built and read.to_json() == document
    assert read.facts.gpus[0].arch == "gfx1100" and read.facts.strays.binding_risk == ("librocm-smi64-1",)
    assert read.failed and not read.passed and read.check("linkage.static").line == "FAIL linkage.static: not found"


@pytest.mark.parametrize("mutate, why", [
    (lambda r: r.update(kind="other"), "not a rocm-fleet report"),
    (lambda r: r.update(schema_version=3), "schema_version 3 is not one this checkout reads (1, 2)"),
    (lambda r: r["facts"].update(kernel={"running": "6.8.0-51-generic"}), "facts.kernel has no 'next_boot'"),
    (lambda r: r["checks"][0].update(status="ok"), "status 'ok' is not one of"),
    (lambda r: r.update(checks=[]), "the report has no checks"),
    (lambda r: r.pop("facts"), "report has no 'facts'"),
    (lambda r: r["facts"].update(gpus="none"), "facts.gpus is not a list"),
    (lambda r: r["checks"][0].pop("evidence"), "check linkage.static: evidence is not an object"),
])
def test_what_the_schema_refuses_the_readers_refuse_with_one_line(mutate, why):
    broken = _report([CheckResult("linkage.static", "static linkage", PASS, "ok")])
    mutate(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, load_schema())
    with pytest.raises(ReportError, match=re.escape(why)):
        Report.from_json(broken)


@pytest.mark.slow
def test_real_reports_match_the_schema():
    for standin in (None, "torch_reports_hip"):
        report, done = cached_check(torch_cpu_venv(), "--device", "cpu", standin=standin) if standin is None \
            else cached_check(torch_cpu_venv(), standin=standin)
        assert report is not None, done.stderr
        jsonschema.validate(report, load_schema())
        assert Report.from_json(report).to_json() == report
