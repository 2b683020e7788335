"""The NF4 smoke's 4-bit matmul paths, run for real: `verify check --device cpu` on the real torch 2.13.0 (CPU) and
bitsandbytes 0.50.1 venv, healthy and with faults planted where a broken wheel has them — bitsandbytes' kernel for
`bitsandbytes::gemm_4bit` broken on one path only (standins/broken_4bit_matmul), a Linear4bit subclass wrong for
one-token inputs (standins/decode_only_linear4bit), and the earlier faults of the quantizer and the dequantizer.

What is mocked, and only there: the GPU — standins/torch_reports_hip and torch_reports_cuda make the CPU torch report
an AMD or NVIDIA device, so that bitsandbytes' own dispatch code answers which kernel each shape would take there
(no tensor can go to such a device here: those NF4 runs fail, and the tests read what the dispatch said).
"""

from __future__ import annotations

import pytest

from tests.support.verify_runs import cached_check, check_by_id, run_check, torch_cpu_venv
from verify.checks import nf4
from verify.report.report import FAIL, PASS, judge_report

FP16_BOUND = nf4.KERNEL_BOUND_UNITS * nf4.UNIT_ROUNDOFF["float16"]


def _nf4(standin: str | None = None, **env: str) -> tuple[dict, dict]:
    """(the nf4.cpu check, the report) of one real `verify check --device cpu`, the probe on one OpenMP thread."""
    report, done = run_check(torch_cpu_venv(), "--device", "cpu", standin=standin, env={"OMP_NUM_THREADS": "1", **env})
    assert report is not None, done.stderr
    assert judge_report(report, exit_status=done.returncode).trustworthy
    return check_by_id(report, "nf4.cpu"), report


@pytest.mark.slow
def test_the_healthy_venv_passes_with_every_path_measured_and_named():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    assert report is not None, done.stderr
    check = check_by_id(report, "nf4.cpu")
    assert check["status"] == PASS, check["reason"]
    paths = check["evidence"]["paths"]
    assert paths["errors"] == {} and len(paths["cases"]) == len(nf4.EXPECTED_CASES) == 144
    assert {(c["api"], c["dtype"], c["double_quant"], c["k"], c["m"]) for c in paths["cases"]} == nf4.EXPECTED_CASES
    # What bitsandbytes' CPU backend really does: no gemm_4bit kernel, so dequantize + F.linear at every M — or, on a
    # CPU with AVX512-BF16, its packed kernel for Linear4bit.
    avx512bf16 = paths["dispatch"]["avx512bf16"]
    assert paths["dispatch"]["gemm_4bit_kernel_for_CPU"] is False
    for case in paths["cases"]:
        packed = avx512bf16 and case["api"] == "Linear4bit"
        assert case["path"] == ("cpu-packed" if packed else "dequantize+linear"), case
        # Orders of magnitude below the bound, and below the quantization error.
        assert case["kernel_error"] < nf4.kernel_bound(case) / 4, case
        assert nf4.QUANTIZATION_ERROR[0] < case["quantization_error"] < nf4.QUANTIZATION_ERROR[1], case
    if not avx512bf16:
        assert check["reason"].startswith(
            "NF4 on cpu: 144 4-bit matmuls (fp16/bf16 × double quant on/off × M 1–64 × K 256/288 × "
            "matmul_4bit/Linear4bit): paths dequantize+linear M 1–64; worst kernel error "
        )
    assert check["reason"].endswith("— CPU run, not a GPU pass")
    (facts,) = report["facts"]["nf4"]
    assert facts["fused_rows"] == "" and facts["kernel_error_of_bound"] < 0.25


FAULTS = [
    pytest.param({"STANDIN_FAULT": "rows-1"}, "(M 1, K 256, a CPU gemm_4bit kernel)", id="M=1 only"),
    pytest.param({"STANDIN_FAULT": "rows-8"}, "(M 1–8, K 256, a CPU gemm_4bit kernel)", id="M<=8"),
    pytest.param({"STANDIN_FAULT": "bfloat16"}, "(M 1–8, bf16, K 256, a CPU gemm_4bit kernel)", id="bf16 only"),
    pytest.param(
        {"STANDIN_FAULT": "double-quant"}, "(M 1–8, double quant, K 256, a CPU gemm_4bit kernel)", id="double quant"
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("env", "where"), FAULTS)
def test_one_broken_path_fails_the_verification_and_is_named(env, where):
    """dequantize_4bit and every matmul past M = 8 are right: only the path that the one-token steps of generation
    take is broken, and the NF4 check names where."""
    check, _ = _nf4("broken_4bit_matmul", **env)
    assert check["status"] == FAIL, check["reason"]
    assert "kernel error over its bound in " in check["reason"] and where in check["reason"], check["reason"]


@pytest.mark.slow
def test_the_planted_kernel_with_nothing_broken_passes():
    """The control: a CPU kernel for gemm_4bit dispatching like ROCm on gfx11, computing right — the failures above
    come from the faults, not from the planting; and the report names the kernel that ran."""
    check, _ = _nf4("broken_4bit_matmul", STANDIN_FAULT="none")
    assert check["status"] == PASS, check["reason"]
    assert "paths a CPU gemm_4bit kernel M 1–64;" in check["reason"]


@pytest.mark.slow
def test_a_linear4bit_wrong_for_one_token_fails_the_verification():
    check, _ = _nf4("decode_only_linear4bit")
    assert check["status"] == FAIL, check["reason"]
    assert (
        "kernel error over its bound in 8 of 144 4-bit matmuls (M 1, Linear4bit, dequantize+linear)"
        in (check["reason"])
    )


@pytest.mark.slow
@pytest.mark.parametrize(("rounding", "status"), [("up", FAIL), ("down", PASS)])
def test_a_fault_just_at_the_kernel_bound_fails_and_just_under_it_passes(rounding, status):
    """One output of each fused call moved from x @ dequantize_4bit(w).T by the fp16 bound (8 unit roundoffs of
    sum |x||w|), rounded to at least that (fails) or to just under it (passes): the bound lies where nf4.py says —
    any fault that moves the fused path's output by the bound or more fails."""
    check, _ = _nf4(
        "broken_4bit_matmul", STANDIN_FAULT="size", STANDIN_FAULT_SIZE=repr(FP16_BOUND), STANDIN_FAULT_ROUND=rounding
    )
    assert check["status"] == status, check["reason"]
    worst = max(
        (c for c in check["evidence"]["paths"]["cases"] if c["dtype"] == "float16"), key=lambda c: c["kernel_error"]
    )
    assert worst["m"] <= 8 and worst["k"] == 256
    # Within one fp16 unit in the last place of the output (at most 2**-10 of sum |x||w|) of the bound.
    if status == FAIL:
        assert FP16_BOUND <= worst["kernel_error"] < FP16_BOUND + 2**-10
    else:
        assert FP16_BOUND - 2**-10 < worst["kernel_error"] < FP16_BOUND


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "seen"),
    [
        pytest.param({}, "quantization error ≥ 0.15 in 144 4-bit matmuls (M 1–64, dequantize+linear)", id="FP4 table"),
        pytest.param(
            {"STANDIN_DEQUANTIZER": "shifted-scales"},
            "quantization error ≥ 0.15 in 144 4-bit matmuls (M 1–64, dequantize+linear)",
            id="shifted scales",
        ),
    ],
)
def test_a_wrong_dequantizer_fails_on_every_path(env, seen):
    """A dequantizer that is wrong everywhere agrees with itself — no kernel error —, so the quantization error (the
    float weight's product) is what catches it, on every path as in the round trip."""
    check, _ = _nf4("wrong_nf4_dequantizer", **env)
    assert check["status"] == FAIL and seen in check["reason"], check["reason"]


# --- what bitsandbytes' dispatch answers on a GPU, through a mocked device ----------------------------------------


@pytest.mark.slow
def test_the_rocm_dispatch_is_asked_through_a_mocked_gfx1100():
    """MOCKED GPU (standins/torch_reports_hip): bitsandbytes' real `_gemm_4bit_use_custom_rocm` answers for gfx1100 —
    the fused kernel at M <= 8 when K is a multiple of the blocksize; the report says so even though nothing could
    run on the (absent) device."""
    report, done = cached_check(torch_cpu_venv(), standin="torch_reports_hip")
    assert report is not None, done.stderr
    check = check_by_id(report, "nf4.cuda0")
    assert check["status"] == FAIL  # no tensor reaches a GPU here
    dispatch = check["evidence"]["paths"]["dispatch"]
    assert dispatch["asked"] == "bitsandbytes.backends.cuda.ops._gemm_4bit_use_custom_rocm"
    assert (dispatch["arch"], dispatch["backend"], dispatch["max_rows"]) == ("gfx1100", "rocm", 256)
    assert check["reason"].endswith(
        "(paths fused kernel M 1–8 (K 256); dequantize+linear M 1–64, asked of _gemm_4bit_use_custom_rocm on gfx1100)"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("standin", "env", "paths"),
    [
        pytest.param(
            "torch_reports_hip",
            {"STANDIN_GFX_ARCH": "gfx942:sramecc+:xnack-"},
            "fused kernel M 1–4 (K 256); dequantize+linear M 1–64, asked of _gemm_4bit_use_custom_rocm on gfx942",
            id="gfx942",
        ),
        pytest.param(
            "torch_reports_cuda",
            {},
            "fused kernel M 1–16 (K 256); dequantize+linear M 1–64, asked of _gemm_4bit_use_custom_cuda on sm_90",
            id="sm_90",
        ),
    ],
)
def test_other_gpus_dispatch_is_asked_through_a_mocked_device(standin, env, paths):
    """MOCKED GPU: a CDNA3 Instinct (gfx942: the fused kernel to M = 4) and an NVIDIA H100 (bitsandbytes' CUDA
    heuristic: to M = 16 for this small weight) — the same probe code asks each its own dispatch."""
    report, done = run_check(torch_cpu_venv(), standin=standin, env=env)
    assert report is not None, done.stderr
    check = check_by_id(report, "nf4.cuda0")
    assert check["reason"].endswith(f"(paths {paths})"), check["reason"]
