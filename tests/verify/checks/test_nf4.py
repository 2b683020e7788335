"""verify/checks/nf4.py: the judgement of NF4 measurements (the real ones: test_runtime.py, test_nf4_paths.py)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from verify.checks import nf4
from verify.checks.nf4 import BOUNDS, judge_nf4

# What torch 2.13.0 / bitsandbytes 0.50.1 measured on this machine's CPU (float32, 1024x1024, blocksize 64).
MEASURED = {
    "roundtrip_mean_abs_error": 0.07272,
    "roundtrip_mean_rel_error": 0.2032,
    "matmul_mean_abs_error": 0.0730,
    "linear4bit_cosine": 0.9959,
    "errors": {},
}


def test_a_real_measurement_is_within_every_bound():
    assert judge_nf4(MEASURED) == (True, [])


def test_bitsandbytes_upper_bounds_are_exclusive():
    ok, problems = judge_nf4(dict(MEASURED, roundtrip_mean_abs_error=0.0733))
    assert not ok and problems == [
        "round-trip mean |err| 0.0733 ≥ 0.0733 (bitsandbytes' test_4bit_quant bound): the 4-bit kernels are wrong"
    ]


def test_a_no_op_quantizer_is_caught_by_every_lower_bound():
    no_op = dict(
        MEASURED,
        roundtrip_mean_abs_error=0.0,
        roundtrip_mean_rel_error=0.0,
        matmul_mean_abs_error=0.0,
        linear4bit_cosine=1.0,
    )
    ok, problems = judge_nf4(no_op)
    assert not ok and len(problems) == len(BOUNDS)
    assert all("did nothing" in p or "never quantized" in p for p in problems)


def test_nan_missing_values_and_raised_steps_are_failures():
    ok, problems = judge_nf4(dict(MEASURED, matmul_mean_abs_error=math.nan))
    assert not ok and "NaN" in problems[0]
    ok, problems = judge_nf4({"errors": {}})
    assert not ok and len(problems) == len(BOUNDS) and all("not measured" in p for p in problems)
    ok, problems = judge_nf4(
        {
            "errors": {"matmul_4bit": "RuntimeError: HIP error: invalid device function"},
            **{k: v for k, v in MEASURED.items() if k not in ("matmul_mean_abs_error", "errors")},
        }
    )
    assert not ok and problems == ["matmul_4bit raised: RuntimeError: HIP error: invalid device function"]


# --- the 4-bit matmul paths (the probe's step 5) ------------------------------------------------------------------

PROBE = Path(__file__).resolve().parents[3] / "verify" / "checks" / "runtime_probe.py"


def _matrix(changed=None, path="dequantize+linear", kernel=2.6e-4, quantization=0.09):
    """A matrix as the probe writes it, every case with the same numbers; `changed` maps a case key (api, dtype,
    double_quant, k, m) to the fields that differ."""
    cases = []
    for api, dtype, double, inner, rows in sorted(nf4.EXPECTED_CASES, key=str):
        case = {
            "api": api,
            "dtype": dtype,
            "double_quant": double,
            "k": inner,
            "m": rows,
            "path": path,
            "kernel_error": kernel,
            "quantization_error": quantization,
        }
        case.update((changed or {}).get((api, dtype, double, inner, rows), {}))
        cases.append(case)
    return {"dispatch": {"device": "cpu", "backend": "cpu", "problems": []}, "cases": cases, "errors": {}, "ms": 180.0}


def test_the_matrix_is_the_probes():
    """nf4.py judges exactly what runtime_probe.py measures (the probe is fed to the venv's python as a file, so it
    cannot import these numbers)."""
    namespace = {"__name__": "runtime_probe"}
    exec(compile(PROBE.read_text(), "runtime_probe.py", "exec"), namespace)  # its top level is standard library only
    for name in ("PATH_DTYPES", "PATH_DOUBLE_QUANT", "PATH_ROWS", "PATH_INNER", "PATH_APIS", "FUSED", "CPU_PACKED"):
        assert namespace[name] == getattr(nf4, name), name
    assert set(nf4.PATH_LABELS) == {
        namespace[n] for n in ("FUSED", "DEQUANTIZE", "CPU_PACKED", "CPU_KERNEL", "UNKNOWN")
    }
    assert len(nf4.EXPECTED_CASES) == 144
    assert any(k % namespace["PATH_BLOCKSIZE"] for k in nf4.PATH_INNER)  # K not a multiple: the fused path's limit
    assert not all(k % namespace["PATH_BLOCKSIZE"] for k in nf4.PATH_INNER)


def test_a_healthy_matrix_passes_and_says_which_paths_ran():
    paths = _matrix()
    assert nf4.judge_paths(paths) == []
    summary = nf4.paths_summary(paths)
    assert summary["paths"] == "dequantize+linear M 1–64" and summary["fused_rows"] == ""
    assert nf4.paths_text(summary) == (
        "144 4-bit matmuls (fp16/bf16 × double quant on/off × M 1–64 × K 256/288 × matmul_4bit/Linear4bit): "
        "paths dequantize+linear M 1–64; worst kernel error 2.6e-04 (fp16, bound 3.9e-03); "
        "quantization error 0.090–0.090"
    )


def test_the_kernel_bound_is_8_unit_roundoffs_of_the_precision_computed_in():
    assert nf4.kernel_bound({"dtype": "float16", "path": "fused"}) == 8 * 2**-11
    assert nf4.kernel_bound({"dtype": "bfloat16", "path": "fused"}) == 8 * 2**-8
    # bitsandbytes' packed AVX512-BF16 CPU kernel turns fp16 into bf16: its rounding is bf16's.
    assert nf4.kernel_bound({"dtype": "float16", "path": "cpu-packed"}) == 8 * 2**-8


@pytest.mark.parametrize(("share", "fails"), [(0.999, False), (1.0, True)])
def test_one_matmul_at_its_bound_fails_and_just_under_passes(share, fails):
    key = ("Linear4bit", "float16", True, 256, 1)
    paths = _matrix({key: {"path": "fused", "kernel_error": share * 8 * 2**-11}})
    problems = nf4.judge_paths(paths)
    assert bool(problems) == fails
    if fails:
        assert problems == [
            "kernel error over its bound in 1 of 144 4-bit matmuls (M 1, fp16, double quant, K 256, Linear4bit, fused "
            "kernel): worst 0.00391 ≥ 0.00391 at Linear4bit fp16 double quant M=1 K=256 (fused kernel) — "
            "the kernel does not compute x @ dequantize_4bit(w).T"
        ]


def test_a_broken_fused_path_is_named_by_where_it_lies():
    broken = {
        key: {"path": "fused", "kernel_error": 0.4}
        for key in nf4.EXPECTED_CASES
        if key[1] == "bfloat16" and key[3] == 256 and key[4] <= 8
    }
    (problem,) = nf4.judge_paths(_matrix(broken))
    assert problem.startswith("kernel error over its bound in 24 of 144 4-bit matmuls (M 1–8, bf16, K 256, fused ")


def test_nan_missing_cases_raised_groups_and_quantization_errors_fail():
    key = ("matmul_4bit", "float16", False, 288, 64)
    assert nf4.judge_paths(_matrix({key: {"kernel_error": None}}))[0].startswith("NaN or inf from 1 4-bit matmuls")
    paths = _matrix()
    paths["cases"] = paths["cases"][:-3]
    assert nf4.judge_paths(paths) == ["3 of 144 4-bit matmuls were not measured"]
    paths["errors"] = {"Linear4bit bfloat16 K=256": "RuntimeError: HIP error: invalid device function"}
    assert nf4.judge_paths(paths)[0] == (
        "4-bit matmul Linear4bit bfloat16 K=256 raised: RuntimeError: HIP error: invalid device function"
    )
    assert "the weights were not quantized" in nf4.judge_paths(_matrix(quantization=0.0))[0]
    assert nf4.judge_paths(_matrix(quantization=0.25))[0].startswith("quantization error ≥ 0.15 in 144 4-bit matmuls")


def test_a_run_without_the_matrix_is_judged_as_before():
    """A probe run written before the paths were measured (no 'paths' key) keeps its verdict."""
    assert judge_nf4(MEASURED) == (True, [])
    ok, problems = judge_nf4(dict(MEASURED, paths={"cases": [], "errors": {}}))
    assert not ok and problems == ["144 of 144 4-bit matmuls were not measured"]


def test_the_gpu_paths_are_reported_as_the_dispatch_answered_through_a_mocked_gpu():
    """MOCKED GPU (probe data, no GPU here): the fused kernel at M 1–8 of K 256, the rest dequantized — on a failure
    too, from the paths the dispatch answered before anything ran."""
    fused = {key: {"path": "fused"} for key in nf4.EXPECTED_CASES if key[3] == 256 and key[4] <= 8}
    paths = _matrix(fused)
    paths["dispatch"] = {"asked": "bitsandbytes.backends.cuda.ops._gemm_4bit_use_custom_rocm", "arch": "gfx1100"}
    summary = nf4.paths_summary(paths)
    assert summary["paths"] == "fused kernel M 1–8 (K 256); dequantize+linear M 1–64"
    assert summary["fused_rows"] == "1–8"
    assert ", asked of _gemm_4bit_use_custom_rocm on gfx1100;" in nf4.paths_text(summary)
    planned = {"dispatch": paths["dispatch"], "cases": [], "errors": {"setup": "x"}, "planned": paths["cases"]}
    assert nf4.paths_summary(planned)["paths"] == "fused kernel M 1–8 (K 256); dequantize+linear M 1–64"


def _probe_namespace() -> dict:
    namespace = {"__name__": "runtime_probe"}
    exec(compile(PROBE.read_text(), "runtime_probe.py", "exec"), namespace)
    return namespace


def _mocked_torch(hip: str | None):
    """MOCK of the few torch attributes Dispatch reads on a GPU (no GPU and no GPU torch here)."""
    import types

    return types.SimpleNamespace(
        _C=types.SimpleNamespace(_dispatch_has_kernel_for_dispatch_key=lambda op, key: key == "CUDA"),
        version=types.SimpleNamespace(hip=hip),
        cuda=types.SimpleNamespace(get_device_capability=lambda index: (9, 0)),
    )


def test_the_probe_asks_the_dispatch_after_its_guards_and_reports_what_it_cannot_ask(monkeypatch):
    """MOCKED dispatch module (a stand-in for bitsandbytes.backends.cuda.ops, which needs a GPU build): the probe's
    Dispatch asks `_gemm_4bit_use_custom_fn` only where the op's kernel does (M within its cap, K a multiple of the
    blocksize); a chooser that raises, or a module without it, gives "unknown" paths and a problem, never a crash."""
    import sys
    import types

    probe = _probe_namespace()
    asked = []

    def use_custom(index, dtype, rows, outer, inner):
        asked.append((index, dtype, rows, outer, inner))
        return rows <= 8

    ops = types.ModuleType("bitsandbytes.backends.cuda.ops")
    ops._gemm_4bit_use_custom_fn = use_custom
    ops._gemm_4bit_custom_max_m = 16
    ops._rocm_gfx_arch = lambda index: "gfx1100"
    monkeypatch.setitem(sys.modules, "bitsandbytes.backends.cuda.ops", ops)
    dispatch = probe["Dispatch"](_mocked_torch("7.2.53211"), "cuda:1")
    assert [dispatch.path("fp16", m, k, False) for m, k in ((8, 256), (9, 256), (64, 256), (1, 288))] == [
        "fused",
        "dequantize+linear",
        "dequantize+linear",
        "dequantize+linear",
    ]
    assert asked == [(1, "fp16", 8, 256, 256), (1, "fp16", 9, 256, 256)]  # not past the cap, not at K 288
    assert dispatch.facts["asked"] == "bitsandbytes.backends.cuda.ops.use_custom"
    assert (dispatch.facts["backend"], dispatch.facts["arch"], dispatch.problems) == ("rocm", "gfx1100", [])

    ops._gemm_4bit_use_custom_fn = lambda *args: 1 / 0
    broken = probe["Dispatch"](_mocked_torch(None), "cuda:0")
    assert broken.path("bf16", 1, 256, False) == broken.path("bf16", 2, 256, False) == "unknown"
    assert broken.facts["arch"] == "sm_90"
    assert broken.problems == ["bitsandbytes.backends.cuda.ops.<lambda>: ZeroDivisionError: division by zero"]

    del ops._gemm_4bit_use_custom_fn
    missing = probe["Dispatch"](_mocked_torch("7.2.53211"), "cuda:0")
    assert missing.path("fp16", 1, 256, False) == "unknown"
    assert missing.problems == ["bitsandbytes.backends.cuda.ops has no _gemm_4bit_use_custom_fn: the paths are unknown"]
    summary = nf4.paths_summary(
        {"dispatch": missing.facts, "cases": [], "planned": [{"m": 1, "k": 256, "path": "unknown"}]}
    )
    assert summary["paths"] == "path unknown M 1 (K 256)"


def test_the_kernel_bound_sits_far_above_every_measured_correct_kernel():
    """docs/verification-gpu-kernels.md, read back: the worst kernel error measured (the probe's path, and the fused
    SIMT kernel's arithmetic emulated) in unit roundoffs, against KERNEL_BOUND_UNITS."""
    text = (PROBE.parents[2] / "docs" / "verification-gpu-kernels.md").read_text()
    section = text[text.index("### The kernel bound") : text.index("### The quantization bound")]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ x \d+", line)]
    measured = [float(v) for line in rows for v in re.findall(r"([0-9.]+) u\b", line)]
    assert measured and max(measured) < nf4.KERNEL_BOUND_UNITS / 10
