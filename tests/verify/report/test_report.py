"""verify/report/report.py and verify/report/report_schema.json: the report's shape, its verdict and one-line reason."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace

import jsonschema
import pytest

from tests.support.report_samples import FACTS, edited, sample, sample_report
from tests.support.standin_rocm import StandinImage
from tests.support.verify_runs import cached_check, run_check_root, torch_cpu_venv
from verify.report.report import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    CheckResult,
    Gpu,
    ModelRun,
    Nf4Run,
    Report,
    ReportError,
    StatusLine,
    StraysFacts,
    exit_status_of,
    headline,
    judge_report,
    load_schema,
    report_passed,
    verdict_of,
)


def _report(checks):
    return sample(checks=checks).to_json()


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
        lambda r: r.update(schema_version=4),
        lambda r: r.update(schema_version=2),  # a new report is version 3: its new facts are required
        lambda r: r["facts"].pop("kernel"),
        lambda r: r["facts"].update(boot_check={"boot_id": "x"}),
        lambda r: r["facts"].pop("probe_account"),  # version 2 says who ran the venv's code
        lambda r: r["facts"].update(probe_account={"user": "alice"}),
        lambda r: r["facts"].pop("model"),  # version 3: the model check's runs (empty when it did not run)
        lambda r: r["facts"].update(model=[{"device": "cuda:0", "status": "pass"}]),
        lambda r: r["request"].pop("model"),
        lambda r: r["request"].update(model="models/llama"),
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
    full = replace(
        FACTS,
        gpus=(Gpu(0, "AMD Radeon RX 7900 XT", "gfx1100", True),),
        linkage=StatusLine(FAIL, "libhipblas.so.3 not found", "libhipblas.so.3 not found"),
        strays=StraysFacts(1, ("librocm-smi64-1",), ("librocm-smi64-1",)),
        nf4=(Nf4Run("cuda:0", PASS, 0.0729, True),),
        model=(ModelRun("cuda:0", WARN, 0.2712, None, 31.5, True, True, False),),
    )
    built = replace(
        sample(
            checks=[
                CheckResult(
                    "linkage.static",
                    "static linkage",
                    FAIL,
                    "not found",
                    {"missing": ["libhipblas.so.3 (needed by …) not found"]},
                )
            ]
        ),
        facts=full,
    )
    document = json.loads(json.dumps(built.to_json()))
    jsonschema.validate(document, load_schema())
    read = Report.from_json(document)
    assert read == built and read.to_json() == document
    assert read.facts.gpus[0].arch == "gfx1100" and read.facts.strays.binding_risk == ("librocm-smi64-1",)
    assert read.facts.probe_account.groups == ("alice", "render", "video")
    assert read.facts.model[0].fits_4bit is True and read.facts.model[0].logits_cosine is None
    assert read.failed and not read.passed and read.check("linkage.static").line == "FAIL linkage.static: not found"


@pytest.mark.parametrize(
    "mutate, why",
    [
        (lambda r: r.update(kind="other"), "not a rocm-fleet report"),
        (lambda r: r.update(schema_version=4), "schema_version 4 is not one this checkout reads (1, 2, 3)"),
        (lambda r: r["facts"].update(model=[{"device": "cuda:0"}]), "facts.model[] has no 'status'"),
        (lambda r: r["facts"].update(kernel={"running": "6.8.0-51-generic"}), "facts.kernel has no 'next_boot'"),
        (lambda r: r["checks"][0].update(status="ok"), "status 'ok' is not one of"),
        (lambda r: r.update(checks=[]), "the report has no checks"),
        (lambda r: r.pop("facts"), "report has no 'facts'"),
        (lambda r: r["facts"].update(gpus="none"), "facts.gpus is not a list"),
        (
            lambda r: r["facts"].update(probe_account={"user": "alice", "uid": 1001}),
            "facts.probe_account has no 'groups'",
        ),
        (lambda r: r["checks"][0].pop("evidence"), "check linkage.static: evidence is not an object"),
    ],
)
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
        report, done = (
            cached_check(torch_cpu_venv(), "--device", "cpu", standin=standin)
            if standin is None
            else cached_check(torch_cpu_venv(), standin=standin)
        )
        assert report is not None, done.stderr
        jsonschema.validate(report, load_schema())
        assert Report.from_json(report).to_json() == report


@pytest.mark.slow
def test_the_rule_holds_the_real_verifiers_reports_to_what_they_say(tmp_path):
    """verify/report/report.py judge_report on real reports: the torch-cpu venv's (an honest fail, exit 1) and a
    stand-in workstation image's (passes, exit 0) are trustworthy, with the exit statuses `verify check` really gave."""
    failing, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    judged = judge_report(failing, exit_status=done.returncode, hostname=failing["host"]["hostname"])
    assert judged.trustworthy and not judged.passed and done.returncode == exit_status_of(failing) == 1
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    passing, code = run_check_root(image.root)
    judged = judge_report(passing, exit_status=code, request={"static_only": True, "root": str(image.root)})
    assert judged.trustworthy and judged.passed and code == exit_status_of(passing) == 0


def test_a_pass_needs_every_check_the_verifier_runs():
    assert report_passed(sample_report()) and report_passed(sample_report(static_only=True))
    assert report_passed(sample_report({"runtime.maps": "skip", "strays": "warn"}))
    # A failing report may stop at runtime.torch (the probe did not run): it is still an honest fail.
    early = sample_report(
        {
            "linkage.static": "fail",
            "runtime.devices": None,
            "runtime.bnb_library": None,
            "runtime.maps": None,
            "nf4.cuda0": None,
        }
    )
    assert judge_report(early).trustworthy and not judge_report(early).passed
    for missing in ("runtime.devices", "runtime.maps", "strays"):
        judged = judge_report(sample_report({missing: None}))
        assert not judged.passed
        assert judged.problem == f"the report lacks check(s) {missing} that the verifier always runs"


def test_a_pass_with_the_model_check_asked_for_needs_one():
    """request.model synthetic or PATH: a passing report has a model check ("model" or "model.<device>"); with
    model off (and in reports from before schema 3, which have no request.model) none is needed."""
    asked = edited(sample_report(), lambda r: r["request"].update(model="synthetic"))
    assert judge_report(asked).problem == "the report lacks check(s) model that the verifier always runs"
    with_run = edited(
        asked,
        lambda r: r["checks"].append(
            {"id": "model.cuda0", "title": "4-bit model", "status": "pass", "reason": "ok", "evidence": {}}
        ),
    )
    assert judge_report(with_run).passed
    assert judge_report(sample_report()).passed  # model off


def test_the_exit_status_is_checked_only_where_there_was_a_process():
    warned = sample_report({"strays": "warn"})
    assert judge_report(warned).passed  # IN_PROCESS: the apt hook's own report, or one kept on disk
    assert judge_report(warned, exit_status=0).passed
    assert judge_report(warned, exit_status=1).problem == "the verifier exited 1, but a 'warn' report means exit 0"
    assert "never came back" in judge_report(warned, exit_status=None).problem
    failed = sample_report({"nf4.cuda0": "fail"})
    assert judge_report(failed, exit_status=1).trustworthy
    assert judge_report(failed, exit_status=0).problem == "the verifier exited 0, but a 'fail' report means exit 1"


@pytest.mark.parametrize(
    "document", [None, [], "pass", {"verdict": "pass"}, edited(sample_report(), lambda r: r.pop("checks"))]
)
def test_what_is_not_a_report_never_passes(document):
    judged = judge_report(document)
    assert not judged.passed
    assert judged.problem.startswith("the report does not match verify/report/report_schema.json (")
