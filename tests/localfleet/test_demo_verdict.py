"""localfleet/demo_verdict.py: whether bin/demo's result is the expected one, judged on real reports.

The reports come from the real verifier: on the torch-cpu venv on this machine, which has no system ROCm either (the
demo hosts' case), with the broken-quantizer stand-in (an NF4 failure), and on stand-in workstation images
(tests/support/standin_rocm.py) where the linkage passes or binds a distro library. The same judgement on the reports
of real fleet hosts is in tests/e2e/test_deploy.py.
"""

from __future__ import annotations

import copy

import pytest

from localfleet.demo_verdict import judge_demo, judge_host
from tests.support.standin_rocm import StandinImage
from tests.support.verify_runs import cached_check, check_by_id, run_check_root, torch_cpu_venv

DEMO_HOST = ("--device", "cpu", "--no-gpu-required")


@pytest.fixture(scope="module")
def no_rocm() -> dict:
    # As the demo's hosts are asked (localfleet/inventory.py: gpu_required False): no amdgpu here either.
    report, done = cached_check(torch_cpu_venv(), *DEMO_HOST)
    assert report is not None, done.stderr
    return report


def test_no_system_rocm_and_a_cpu_torch_is_the_expected_result(no_rocm):
    assert no_rocm["verdict"] == "fail"
    assert judge_host("ws1", no_rocm).surprises == ()
    verdict = judge_demo(["ws1", "ws2"], {"ws1": no_rocm, "ws2": no_rocm}, pyinfra_exit=1)
    assert verdict.expected and verdict.surprises == ()


def test_a_host_without_a_report_is_a_surprise(no_rocm):
    verdict = judge_demo(["ws1", "ws2"], {"ws1": no_rocm}, pyinfra_exit=1)
    assert not verdict.expected
    assert verdict.surprises == (
        "ws2: no verification report: the host was unreachable or a stage failed before "
        "verification (the summary says which)",
    )


@pytest.mark.parametrize(
    "code, words",
    [
        (0, "pyinfra exited 0: no host failed, although every host here must fail verification"),
        (2, "pyinfra exited 2: a usage or internal error (see its output above)"),
        (-9, "pyinfra exited -9: killed by signal 9"),
    ],
)
def test_pyinfra_exiting_other_than_1_is_a_surprise(no_rocm, code, words):
    assert judge_demo(["ws1"], {"ws1": no_rocm}, pyinfra_exit=code).surprises == (words,)


def test_another_failing_check_is_a_surprise():
    broken, _ = cached_check(torch_cpu_venv(), *DEMO_HOST, standin="broken_nf4_quantizer")
    [surprise] = judge_host("ws1", broken).surprises
    assert surprise.startswith("nf4.cpu failed: NF4 on cpu: round-trip mean |err| 0.0000")


def test_a_passing_linkage_is_a_surprise(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    report, _ = run_check_root(image.root)
    assert check_by_id(report, "linkage.static")["status"] == "pass"
    [surprise] = judge_host("ws3", report).surprises
    assert surprise.startswith(
        "linkage.static is PASS — this host has a system ROCm (or something serving libhipblas.so.3): "
    )


def test_a_linkage_failing_for_another_reason_is_a_surprise(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch(bundled_sonames="bare")
    image.bitsandbytes()
    image.system_rocm(needed_by_hipblas=["librocm_smi64.so.1"])
    image.distro_library("librocm_smi64.so.1", package="librocm-smi64-1", version="5.7.0-1", source="rocm-smi-lib")
    report, _ = run_check_root(image.root)
    [surprise] = judge_host("ws1", report).surprises
    assert surprise.startswith(
        "linkage.static failed, but not because libhipblas.so.3 is missing: "
        "librocm_smi64.so.1 resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1"
    )


def test_libraries_missing_beyond_bitsandbytes_rocm_ones_are_a_surprise(no_rocm):
    """The real no-ROCm report, with one more library of bitsandbytes' not found (as a broken base system would)."""
    report = copy.deepcopy(no_rocm)
    linkage = check_by_id(report, "linkage.static")
    linkage["evidence"]["bnb_needed"].append({"name": "libstdc++.so.6", "outcome": "not found", "path": None})
    linkage["evidence"]["missing"].append("libstdc++.so.6 (needed by …) not found")
    assert judge_host("ws1", report).surprises == (
        "linkage.static: libbitsandbytes_rocm72.so also misses libstdc++.so.6, which no ROCm provides",
    )


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r.update(verdict="pass"), "the report's verdict 'pass' is not what its checks give"),
        (
            lambda r: r.update(verdict="FAIL"),
            "the report does not match verify/report/report_schema.json (verdict: 'FAIL'",
        ),
        (
            lambda r: r["host"].pop("hostname"),
            "the report does not match verify/report/report_schema.json (host: 'hostname' is",
        ),
    ],
)
def test_a_report_that_proves_nothing_is_a_surprise(no_rocm, change, words):
    """The demo judges reports with verify/report/report.py's rule too: a damaged or edited report is not the expected
    one, whatever its checks say."""
    report = copy.deepcopy(no_rocm)
    change(report)
    [surprise] = judge_host("ws1", report).surprises
    assert surprise.startswith(f"the report proves nothing: {words}"), surprise
