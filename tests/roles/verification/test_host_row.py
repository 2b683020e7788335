"""roles/verification/host_row.py: one host's row — the verdict and the finding it rests on, the short cells, and the
rule for results newer than the report (the status task's): they can make a host worse, never better. The reports
are built as the verifier builds them (tests/support/fleet_reports.py, report_samples.py); rows of real reports are
in test_summary.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roles.verification.host_row import COLUMNS, NOT_VERIFIED, VERIFIED, HostOutcome, Later, row_for
from roles.verification.summary import render_html, render_markdown
from tests.support.fleet_reports import STRAY, report_of
from tests.support.report_samples import FACTS, RUNTIME, STATIC, edited, sample, sample_report
from verify.report.report import BootCheckFacts, CheckResult, KernelFacts, ModelRun, Nf4Run, Report, StraysFacts


def _hook(kind: str) -> Later:
    report = report_of("ws1", kind, at="2026-12-01T19:00:00Z")
    return Later("apt hook, 2026-12-01 19:00Z (1 h ago)", report)


def test_a_newer_failing_result_fails_a_passing_host_and_says_where_it_was_seen():
    row = row_for(HostOutcome("ws1", VERIFIED, report_of("ws1", "pass"), later=(_hook("strays"),)))
    assert row.verdict == "FAIL" and row.lead.check == "strays"
    assert row.lead.sources == ("apt hook, 2026-12-01 19:00Z (1 h ago)",)
    assert row.reason == f"FAIL strays: {STRAY}" and dict(row.checks)["strays"] == "fail"


def test_a_newer_result_with_a_warning_makes_a_passing_host_warn():
    warned = replace(
        report_of("ws1", "pass", at="2026-12-01T19:00:00Z"),
        checks=tuple(replace(c, status="warn") if c.id == "strays" else c for c in report_of("ws1", "pass").checks),
        verdict="warn",
    )
    row = row_for(HostOutcome("ws1", VERIFIED, report_of("ws1", "pass"), later=(Later("apt hook", warned),)))
    assert (row.verdict, row.lead.check) == ("WARN", "strays")


def test_a_newer_passing_result_never_clears_a_failing_report():
    row = row_for(HostOutcome("ws1", VERIFIED, report_of("ws1", "no_rocm"), later=(_hook("pass"),)))
    assert row.verdict == "FAIL" and row.lead.check == "linkage.static"
    assert dict(row.checks)["linkage.static"] == "fail"


def test_an_unusable_kept_file_leaves_a_passing_host_not_verified():
    line = "/var/lib/rocm-fleet/apt-hook/last.json cannot be used (not JSON: …): it proves nothing"
    row = row_for(HostOutcome("ws1", VERIFIED, report_of("ws1", "pass"), unusable=(line,)))
    assert (row.verdict, row.reason) == ("NOT VERIFIED", f"NOT VERIFIED {line}")


def test_without_a_report_a_passing_static_result_proves_nothing_and_a_failing_one_fails():
    nothing = row_for(
        HostOutcome("ws1", NOT_VERIFIED, detail="no verification report kept on the host", later=(_hook("pass"),))
    )
    assert (nothing.verdict, nothing.reason) == ("NOT VERIFIED", "no verification report kept on the host")
    assert nothing.rocm == "7.2.4-93"  # what the static result saw is still shown
    failing = row_for(
        HostOutcome("ws1", NOT_VERIFIED, detail="no verification report kept on the host", later=(_hook("strays"),))
    )
    assert failing.verdict == "FAIL" and failing.lead.check == "strays"


def test_strays_that_could_bind_are_never_hidden_behind_the_cut():
    """Seven strays as Debian 12 really pulls them in (alphabetical, the two binding risks last): the row names the
    risky ones first, marked, and counts the rest."""
    packages = [
        "libamd-comgr2",
        "libamdhip64-5",
        "libhsakmt1",
        "librocsparse0",
        "libdrm-amdgpu1x",
        "libhsa-runtime64-1",
        "librocm-smi64-1",
    ]
    risky = ["libhsa-runtime64-1", "librocm-smi64-1"]
    strays = StraysFacts(7, tuple(packages), tuple(risky))
    report = replace(sample({"strays": "warn"}), facts=replace(FACTS, strays=strays))
    cell = row_for(HostOutcome("ws1", VERIFIED, report)).cells[COLUMNS.index("Strays") - 1]
    assert cell.startswith("7: libhsa-runtime64-1 ⚠, librocm-smi64-1 ⚠, ") and cell.endswith(" +3"), cell


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r.update(verdict="pass"), "not proven — the report's verdict 'pass' is not what its checks give"),
        (
            lambda r: r.update(checks=[c for c in r["checks"] if c["status"] != "fail"]),
            "not proven — the report's verdict 'fail' is not what its checks give",
        ),
    ],
)
def test_a_report_that_does_not_prove_its_verdict_is_not_shown_as_one(change, words):
    """The summary shows PASS or WARN only where verify/report/report.py's rule says the report proves it. (A
    document that does not match the schema never becomes a Report to show: Report.from_json refuses it.)"""
    report = Report.from_json(edited(sample_report({"linkage.static": "fail"}), change))
    row = row_for(HostOutcome("ws1", VERIFIED, report))
    assert row.verdict == "NOT VERIFIED" and row.reason.startswith(words), row
    assert "NOT VERIFIED" in render_markdown([HostOutcome("ws1", VERIFIED, report)], title="t", generated_at="now")


def test_the_kernel_cell_says_what_boots_next_and_a_failed_boot_check():
    """Day 2: the running kernel, the one a pending reboot brings (marked when it has no amdgpu.ko), and the boot-time
    check's last result as the report carries it (facts.boot_check) — in the cell when it failed, in the page's
    details always."""

    def outcome(**facts) -> HostOutcome:
        report = report_of("ws1", "pass")
        return HostOutcome("ws1", VERIFIED, replace(report, facts=replace(report.facts, **facts)))

    def kernel_cell(**facts):
        return row_for(outcome(**facts))

    column = COLUMNS.index("Kernel") - 1
    assert kernel_cell().cells[column] == "6.8.0-51-generic"
    pending = KernelFacts(
        "6.8.0-49-generic",
        "6.8.0-51-generic",
        True,
        True,
        True,
        False,
        ("6.8.0-49-generic", "6.8.0-51-generic"),
        ("6.8.0-51-generic",),
    )
    boot = BootCheckFacts(
        "b1",
        "6.8.0-49-generic",
        "2026-12-01T08:00:00Z",
        "fail",
        "kernel.driver: amdgpu is not loaded",
        previous_kernel="6.8.0-45-generic",
    )
    row = kernel_cell(kernel=pending, boot_check=boot)
    assert row.cells[column] == (
        "6.8.0-49-generic → 6.8.0-51-generic (reboot pending, no amdgpu.ko ⚠); boot check FAIL in 6.8.0-49-generic"
    )
    assert row.boot == (
        "boot-time check: FAIL in 6.8.0-49-generic (after 6.8.0-45-generic), 2026-12-01 08:00Z — "
        "kernel.driver: amdgpu is not loaded"
    )
    assert "boot-time check: FAIL in 6.8.0-49-generic (after 6.8.0-45-generic)" in render_html(
        [outcome(kernel=pending, boot_check=boot)], title="t", generated_at="now"
    )
    assert "boot-time check" not in render_html([outcome()], title="t", generated_at="now")  # none carried
    passed = kernel_cell(boot_check=replace(boot, verdict="pass", reason="all 18 checks passed"))
    assert passed.cells[column] == "6.8.0-51-generic" and passed.boot.startswith("boot-time check: PASS in ")
    assert kernel_cell(kernel=None).cells[column] == "not checked"  # a version-1 report


def test_the_nf4_column_says_where_the_fused_kernel_ran_and_reads_older_reports():
    """The NF4 column: the round trip's error per device and, on a GPU, the rows (tokens per step) bitsandbytes' fused
    kernel ran at — the path of one-token decoding; a report written before the paths were measured shows what it
    showed; a CPU run says it is not a GPU pass."""

    def cell(runs: tuple[Nf4Run, ...]) -> str:
        checks = [CheckResult(i, i, "pass", "ok") for i in STATIC + RUNTIME]
        report = replace(sample(checks=checks), facts=replace(FACTS, nf4=runs))
        return row_for(HostOutcome("ws1", VERIFIED, report)).cells[COLUMNS.index("NF4 error") - 1]

    two = (Nf4Run("cuda:0", "pass", 0.0727, True, "1–8", 0.04), Nf4Run("cuda:1", "fail", 0.0727, True, "1–4", 52.0))
    assert cell(two) == "cuda:0 0.0727, fused M 1–8; cuda:1 0.0727, fused M 1–4 ✗"
    assert cell((Nf4Run("cuda:0", "pass", 0.0727, True),)) == "cuda:0 0.0727"  # an older report
    assert cell((Nf4Run("cpu", "pass", 0.0727, False, "", 0.03),)) == "cpu 0.0727 (CPU, not a GPU pass)"


def test_the_model_column_says_per_device_how_the_4bit_model_did_and_whether_a_checkpoint_fits():
    """The 4-bit model column: off when not asked; per GPU the footprint ratio and the logits cosine; for a checkpoint
    whether it fits each GPU (here a 13B on a 20 GB 7900 XT: in 4-bit, not in fp16, so not compared); a CPU run says
    it is not a GPU pass; asked but not run (a refusal) says so."""

    def cell(model: str, runs: tuple[ModelRun, ...], refused: bool = False) -> str:
        checks = [CheckResult(i, i, "pass", "ok") for i in STATIC + RUNTIME]
        checks += [CheckResult(f"model.{run.device.replace(':', '')}", "model", run.status, "…") for run in runs]
        checks += [CheckResult("model", "model", "warn", "model check refused: …")] if refused else []
        report = sample(checks=checks)
        report = replace(report, request=replace(report.request, model=model), facts=replace(FACTS, model=runs))
        return row_for(HostOutcome("ws1", VERIFIED, report)).cells[COLUMNS.index("4-bit model") - 1]

    assert cell("off", ()) == "off"
    assert (
        cell(
            "synthetic",
            (
                ModelRun("cuda:0", "pass", 0.3041, 0.9702, 48.2, True),
                ModelRun("cuda:1", "pass", 0.3041, 0.9688, 51.0, True),
            ),
        )
        == "cuda:0 0.304, cos 0.970; cuda:1 0.304, cos 0.969"
    )
    assert (
        cell("/srv/models/llama-13b", (ModelRun("cuda:0", "warn", 0.2712, None, 21.0, True, True, False),))
        == "cuda:0 0.271, not compared, fits 4-bit, not fp16 ⚠"
    )
    assert (
        cell("synthetic", (ModelRun("cpu", "fail", 0.98, 0.999, 3.1, False),))
        == "cpu 0.980, cos 0.999 ✗ (CPU, not a GPU pass)"
    )
    assert cell("synthetic", (), refused=True) == "WARN: not run"
