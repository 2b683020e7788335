"""verify/checks/nf4.py: the judgement of an NF4 measurement (the real measurement is in test_runtime.py)."""

from __future__ import annotations

import math

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
