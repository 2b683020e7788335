"""Judging one device's model measurement: a 4-bit NF4 causal LM against its 16-bit reference (see model_probe.py).

Pure arithmetic on the probe's numbers, so it runs with the host's python3 and is easy to test. The synthetic model
and its prompt are fixed here (the caller passes them to the probe), so every host measures the same thing.

Footprint. `model.get_memory_footprint()` counts parameters and buffers only: a 4-bit layer's packed weight (4 bits
per weight) but not its quantization constants, which sit in the layer's quant_state. So the ratio 4-bit / 16-bit
follows from the model's parameter split alone — Q weights in 4-bit layers, U other parameters, B buffer bytes:
    low  = (Q/2 + 2U + B) / (2Q + 2U + B)                 what get_memory_footprint counts;
    high = (Q/2 + 4Q/64 + 2U + B) / (2Q + 2U + B)         with one fp32 scale per 64-weight block counted too,
and the check wants the measured ratio within [low - 0.01, high + 0.01]. The band holds for any model (synthetic or a
checkpoint), whichever way a Transformers release counts; a quantizer that did nothing gives about 1.0. Measured:
the default synthetic model (4 layers, 512 wide, vocabulary 1024) gives 0.3038, its band 0.3038-0.3328.
For checkpoints the issue's "≈ 0.27-0.33" is the typical range of 7B-13B Llama-family models and is only reported:
by this arithmetic Llama-2-13B gives 0.269, a 128k-vocabulary 8B model 0.35 — both correct.

Agreement. Measured with bench/model_bounds.py (torch 2.13.0 CPU, bitsandbytes 0.50.1, Transformers 5.24.0), 4 shapes
(layers x width, vocabulary: 4x512, 1024 — the check's; 2x256, 512; 4x768, 2048; 8x512, 4096) x 5 seeds x both
16-bit dtypes (bfloat16, the CPU's; float16, a GPU's), 64 prompt positions, 16 greedy tokens:
    logits cosine   min 0.9407, median 0.9558, max 0.9775 (the check's model, seed 1234: 0.9438 bf16, 0.9414 fp16);
    top-1 agreement min 0.250,  median 0.586,  max 0.734  (the check's model: 0.500 bf16, 0.453 fp16);
    greedy generation identical twice in all 40 runs.
A randomly initialised model has flat logits, so 4-bit rounding flips many top-1 tokens: a trained model is expected
to agree more, not less. Injected faults, the check's model (tests/support/standins/):
    NF4 codes decoded with the FP4 table      cosine 0.0313, top-1 0.000 (footprint right: 0.3038);
    each block's scale from the next block    cosine 0.7317, top-1 0.188 (a subtle fault);
    a quantizer that does nothing             footprint ratio 1.0000 (and bitsandbytes' CPU path then raises);
    control: the same dequantizing path with bitsandbytes' real kernel: cosine 0.9439, top-1 0.516.
Bounds: cosine > 0.90 — 0.04 under the lowest correct run (a kernel that is right up to 16-bit rounding moves the
cosine by far less: the unquantized model against float32 gives 0.99996 in bf16, 0.999998 in fp16), while the subtle
fault lands at 0.73; top-1 >= 0.15 — 10 of 64 positions, under the lowest correct run (0.25, a deeper model with a
4x larger vocabulary) and a hundred times chance (1/1024). For the synthetic model only, cosine < 0.995: above the
highest correct run, below what an unquantized model gives (> 0.9999) — the 4-bit layers must change something. A
checkpoint has no upper bound (a trained model in 4-bit may agree almost perfectly) and the same lower bounds.

Generation. The logits above come from one forward pass over a prompt, which takes bitsandbytes' many-row path; a
decode step multiplies one row, and on a GPU that is the fused kernel. So the probe also compares (a) the logits of
one-token decoding through the KV cache with a forward pass of the same 4-bit model over the same tokens (they differ
by rounding alone: under DECODE_ERROR_UNITS unit roundoffs of the dtype; a checkpoint gets DECODE_ERROR_CHECKPOINT),
and (b) the 4-bit model's greedy continuation with the reference teacher-forced on it (cosine as above, top-1 at least
one token in sixteen). The sweep, the faults each catches and what each misses: docs/verification-gpu-kernels.md.

Fit. A model fits a GPU when its weights leave a tenth of the memory (at least 1 GiB) free for the runtime's context,
activations and a short generation's KV cache: an estimate, for the admin's question "does our 13B fit on the
7900 XT?" (13B: 26 GB in fp16 — no; about 7.8 GB in 4-bit with its scales — yes). A 4-bit model that generated on a
GPU fits it, measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The synthetic model and prompt: the caller passes these to the probe (model_probe.py has the same defaults).
SEED = 1234
LAYERS = 4
HIDDEN = 512
VOCAB = 1024
PROMPT_TOKENS = 64  # positions whose logits are compared
GENERATE_FROM = 8  # greedy generation starts from the first 8 prompt tokens
NEW_TOKENS = 16
PROMPT_ARGUMENTS = (
    "--prompt-tokens",
    str(PROMPT_TOKENS),
    "--generate-from",
    str(GENERATE_FROM),
    "--new-tokens",
    str(NEW_TOKENS),
)
SYNTHETIC_ARGUMENTS = (
    "--layers",
    str(LAYERS),
    "--hidden",
    str(HIDDEN),
    "--vocab",
    str(VOCAB),
    "--seed",
    str(SEED),
    *PROMPT_ARGUMENTS,
)

BLOCKSIZE = 64  # bitsandbytes' 4-bit blocksize, as Transformers uses it
SCALE_BYTES = 4  # one fp32 absmax per block (no double quantization: Transformers' default)
RATIO_MARGIN = 0.01
TYPICAL_RATIO = (0.27, 0.33)  # 7B-13B Llama-family checkpoints; reported, not judged

COSINE_LOW = 0.90
COSINE_HIGH = 0.995  # synthetic only
TOP1_LOW = 0.15

# Generation (docs/verification-gpu-kernels.md has the measurements): one-token decoding through the KV cache against a
# forward pass of the same 4-bit model over the same tokens — worst position's ||step - full|| / ||full||, which
# scales with the unit roundoff of the model's dtype (measured up to 2.5 units); and the 4-bit model's greedy
# continuation against the 16-bit reference teacher-forced on it.
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
DECODE_ERROR_UNITS = 8  # the synthetic model's bound, in unit roundoffs of its dtype
DECODE_ERROR_CHECKPOINT = 0.1  # a checkpoint's: deeper and trained, not measured here; a broken kernel gives 0.4-1.5
CONTINUATION_COSINE_LOW = COSINE_LOW
CONTINUATION_TOP1_LOW = 0.0625  # 1 of the 16 generated tokens


def decode_error_bound(dtype: str | None, synthetic: bool) -> float:
    if not synthetic:
        return DECODE_ERROR_CHECKPOINT
    return DECODE_ERROR_UNITS * UNIT_ROUNDOFF.get(dtype or "", UNIT_ROUNDOFF["bfloat16"])


RESERVE_FRACTION = 0.10
RESERVE_MIN_BYTES = 2**30

NO_QUANTIZATION = "the weights were not quantized"


def footprint_16bit(measurement: Mapping[str, Any]) -> tuple[int | None, bool]:
    """(the 16-bit footprint, whether it was measured): the reference's, else 2 bytes per counted parameter."""
    measured = measurement.get("footprint_reference")
    if measured:
        return int(measured), True
    quantized, other = measurement.get("quantized_weights"), measurement.get("other_parameters")
    if quantized is None or other is None:
        return None, False
    return 2 * (quantized + other) + int(measurement.get("buffer_bytes") or 0), False


def footprint_ratio(measurement: Mapping[str, Any]) -> float | None:
    four, (sixteen, _) = measurement.get("footprint_4bit"), footprint_16bit(measurement)
    return four / sixteen if four and sixteen else None


def expected_ratio_band(measurement: Mapping[str, Any]) -> tuple[float, float] | None:
    """(low, high) from the parameter split, before the margin; None when the probe counted nothing."""
    quantized, other = measurement.get("quantized_weights"), measurement.get("other_parameters")
    if not quantized or other is None:
        return None
    buffers = int(measurement.get("buffer_bytes") or 0)
    sixteen = 2 * (quantized + other) + buffers
    packed = quantized / 2 + 2 * other + buffers
    scales = quantized * SCALE_BYTES / BLOCKSIZE
    return packed / sixteen, (packed + scales) / sixteen


def weight_bytes(measurement: Mapping[str, Any]) -> dict[str, int] | None:
    """Bytes the weights need: in 16 bits, and in 4-bit NF4 with its scales (what a GPU must hold, beyond the run)."""
    quantized, other = measurement.get("quantized_weights"), measurement.get("other_parameters")
    if quantized is None or other is None:
        return None
    buffers = int(measurement.get("buffer_bytes") or 0)
    return {
        "16bit": 2 * (quantized + other) + buffers,
        "4bit": int(quantized / 2 + quantized * SCALE_BYTES / BLOCKSIZE) + 2 * other + buffers,
    }


def fits(needed: int, total: int) -> bool:
    reserve = max(RESERVE_MIN_BYTES, int(total * RESERVE_FRACTION))
    return needed <= total - reserve


def _number(measurement: Mapping[str, Any], key: str) -> float | None:
    value = measurement.get(key)
    return None if value is None or value != value else float(value)  # NaN counts as not measured


def judge_model_run(measurement: Mapping[str, Any], synthetic: bool) -> tuple[bool, list[str]]:
    """(within bounds, problems) for one device. A missing number is a problem, never a silent pass — except the
    logits comparison of a checkpoint whose 16-bit reference could not be loaded (the caller warns about that)."""
    problems: list[str] = []
    errors = {k: v for k, v in (measurement.get("errors") or {}).items() if "traceback" not in k}
    if not synthetic:
        # A checkpoint's 16-bit reference may well not fit where its 4-bit model does: the caller warns.
        errors.pop("16-bit reference", None)

    kinds = measurement.get("quant_types")
    if kinds is not None and (kinds != ["nf4"] or not measurement.get("quantized_weights")):
        problems.append(f"the model has no NF4 layers (4-bit layer types: {kinds or 'none'})")

    ratio, band = footprint_ratio(measurement), expected_ratio_band(measurement)
    if ratio is not None and band is not None:
        low, high = band[0] - RATIO_MARGIN, band[1] + RATIO_MARGIN
        if not low <= ratio <= high:
            what = NO_QUANTIZATION if ratio > 0.5 else "the 4-bit storage is not what NF4 takes"
            problems.append(
                f"footprint 4-bit/16-bit {ratio:.4f} outside {low:.4f}-{high:.4f} "
                f"(4 bits per weight of its 4-bit layers): {what}"
            )
    elif not errors:  # an error says why
        problems.append("the footprint ratio was not measured")

    compared = measurement.get("footprint_reference") is not None or synthetic
    cosine, top1 = _number(measurement, "logits_cosine"), _number(measurement, "top1_agreement")
    finite = measurement.get("logits_finite")
    if finite is False:
        problems.append("the 4-bit logits are not finite (NaN or inf): the 4-bit kernels are wrong")
    elif cosine is not None:
        if cosine < COSINE_LOW:
            problems.append(
                f"logits cosine to the 16-bit reference {cosine:.4f} < {COSINE_LOW}: the 4-bit kernels are wrong"
            )
        elif synthetic and cosine > COSINE_HIGH:
            problems.append(
                f"logits cosine {cosine:.4f} > {COSINE_HIGH}: identical to the reference — {NO_QUANTIZATION}"
            )
        if top1 is not None and top1 < TOP1_LOW:
            problems.append(f"top-1 agreement {top1:.3f} < {TOP1_LOW}: the 4-bit model predicts other tokens")
    elif compared and not errors:
        problems.append("the logits were not compared")
    problems.extend(_judge_generation(measurement, synthetic, compared, bool(errors)))
    identical = measurement.get("generation_identical")
    if identical is False:
        problems.append("two greedy generations differ: the 4-bit kernels are not deterministic")
    elif identical is None and not errors:
        problems.append("nothing was generated")

    problems.extend(f"{step} raised: {message}" for step, message in errors.items())
    return (not problems, problems)


def _judge_generation(measurement: Mapping[str, Any], synthetic: bool, compared: bool, errors: bool) -> list[str]:
    """Problems of generation itself: (a) one-token decoding against a full forward of the same 4-bit model, (b) the
    continuation against the teacher-forced reference. Judged where the probe measured them (a run written before it
    did has no such keys)."""
    problems: list[str] = []
    if "incremental_decode_error" in measurement:
        decode = _number(measurement, "incremental_decode_error")
        bound = decode_error_bound(measurement.get("dtype"), synthetic)
        if measurement.get("decode_finite") is False:
            problems.append(
                "the logits of one-token decoding are not finite (NaN or inf): the 4-bit decoding kernels are wrong"
            )
        elif decode is None:
            if not errors:
                problems.append("one-token decoding was not compared with a full forward pass")
        elif not decode < bound:
            problems.append(
                f"one-token decoding through the KV cache differs from a forward pass of the same 4-bit model by "
                f"{decode:.4f} ≥ {bound:.4f} (worst position, relative): the kernel one-token steps take "
                "(on a GPU the fused one) is wrong"
            )
    if "continuation_top1" in measurement:
        cosine, top1 = _number(measurement, "continuation_cosine"), _number(measurement, "continuation_top1")
        if cosine is None or top1 is None:
            # Not finite step logits (said above) have no cosine either.
            if compared and not errors and measurement.get("decode_finite") is not False:
                problems.append("the generated tokens were not compared with the 16-bit reference")
        else:
            if cosine < CONTINUATION_COSINE_LOW:
                problems.append(
                    f"the generated tokens' logits: cosine to the 16-bit reference teacher-forced on them "
                    f"{cosine:.4f} < {CONTINUATION_COSINE_LOW}: the 4-bit decoding kernels are wrong"
                )
            if top1 < CONTINUATION_TOP1_LOW:
                problems.append(
                    f"the 16-bit reference, teacher-forced, picks {top1:.3f} of the 4-bit model's generated tokens "
                    f"< {CONTINUATION_TOP1_LOW}: the 4-bit model generates other text"
                )
    return problems


def bounds_evidence(synthetic: bool) -> dict[str, Any]:
    return {
        "footprint_ratio": {
            "band": "parameter split, 4 bits per quantized weight, with or without fp32 scales",
            "margin": RATIO_MARGIN,
            "typical": list(TYPICAL_RATIO),
        },
        "logits_cosine": {"greater_than": COSINE_LOW, "less_than": COSINE_HIGH if synthetic else None},
        "top1_agreement": {"at_least": TOP1_LOW},
        "generation": "two greedy generations identical",
        "incremental_decode_error": {
            "less_than": {dtype: decode_error_bound(dtype, synthetic) for dtype in UNIT_ROUNDOFF}
        },
        "continuation_cosine": {"greater_than_or_equal": CONTINUATION_COSINE_LOW},
        "continuation_top1": {"at_least": CONTINUATION_TOP1_LOW},
        "fit_reserve": {"fraction": RESERVE_FRACTION, "min_bytes": RESERVE_MIN_BYTES},
    }
