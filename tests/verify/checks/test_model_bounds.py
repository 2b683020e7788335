"""verify/checks/model_bounds.py: the arithmetic behind the model check's bounds, and its docstring's claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verify.checks import model_bounds

GIB = 2**30


def _llama(layers, hidden, intermediate, vocab, kv_dim=None):
    """The parameter split of a Llama checkpoint: weights of the linear layers (4-bit), the rest (16-bit)."""
    kv_dim = kv_dim or hidden
    quantized = layers * (2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * intermediate)
    other = 2 * vocab * hidden + (2 * layers + 1) * hidden
    return {"quantized_weights": quantized, "other_parameters": other, "buffer_bytes": 256}


LLAMA2_13B = _llama(40, 5120, 13824, 32000)
LLAMA3_8B = _llama(32, 4096, 14336, 128256, kv_dim=1024)


def test_the_checks_synthetic_model_band_is_the_measured_ratio():
    # 4 layers x 512 (MLP 1536), vocabulary 1024: the probe's parameter split and get_memory_footprint's 4-bit count.
    measured = {**_llama(4, 512, 1536, 1024), "footprint_4bit": 8922368, "footprint_reference": 29369600}
    low, high = model_bounds.expected_ratio_band(measured)
    assert (round(low, 4), round(high, 4)) == (0.3038, 0.3328)
    assert model_bounds.footprint_ratio(measured) == pytest.approx(low)


def test_the_docstrings_checkpoint_ratios():
    assert round(model_bounds.expected_ratio_band(LLAMA2_13B)[0], 3) == 0.269
    assert round(model_bounds.expected_ratio_band(LLAMA3_8B)[0], 2) == 0.35


def test_a_13b_model_fits_a_20_gib_gpu_in_4bit_only():
    needed = model_bounds.weight_bytes(LLAMA2_13B)
    assert round(needed["16bit"] / GIB, 1) == 24.2 and round(needed["4bit"] / GIB, 1) == 7.3
    assert model_bounds.fits(needed["4bit"], 20 * GIB) and not model_bounds.fits(needed["16bit"], 20 * GIB)
    assert model_bounds.fits(needed["16bit"], 48 * GIB)


def test_the_reserve_is_a_tenth_of_the_memory_and_at_least_one_gib():
    assert model_bounds.fits(9 * GIB, 10 * GIB) and not model_bounds.fits(9 * GIB + 1, 10 * GIB)
    assert model_bounds.fits(1 * GIB, 2 * GIB) and not model_bounds.fits(1 * GIB + 1, 2 * GIB)


def test_the_synthetic_arguments_are_the_probes_defaults():
    """The probe can run alone (`python - < model_probe.py`) and measures the check's model."""
    source = (Path(model_bounds.__file__).parent / "model_probe.py").read_text()
    namespace = {"__name__": "model_probe"}
    exec(compile(source, "model_probe.py", "exec"), namespace)  # its top level imports the standard library only
    defaults = vars(namespace["parse_args"]([]))
    given = vars(namespace["parse_args"](list(model_bounds.SYNTHETIC_ARGUMENTS)))
    assert given == defaults


def test_the_bounds_sit_inside_the_measured_correct_runs():
    """The docstring's measured ranges, read back: the bounds keep a margin below every correct run."""
    doc = model_bounds.__doc__
    cosine_min = float(re.search(r"logits cosine\s+min ([0-9.]+)", doc).group(1))
    cosine_max = float(re.search(r"logits cosine\s+min [0-9.]+, median [0-9.]+, max ([0-9.]+)", doc).group(1))
    top1_min = float(re.search(r"top-1 agreement min ([0-9.]+)", doc).group(1))
    assert model_bounds.COSINE_LOW < cosine_min and cosine_max < model_bounds.COSINE_HIGH
    assert model_bounds.TOP1_LOW < top1_min


DOC = Path(__file__).resolve().parents[3] / "docs" / "verification-gpu-kernels.md"


def test_the_generation_bounds_sit_outside_every_measured_correct_run():
    """The measured ranges of docs/verification-gpu-kernels.md, read back: the decode bound keeps a factor 3 over the
    worst correct run of each dtype, the continuation's bounds stay under the lowest."""
    text = DOC.read_text()
    for dtype, name in (("bfloat16", "bf16"), ("float16", "fp16")):
        row = re.search(rf"\| \(a\) decode error, {name} \(2 / 4 / 8 layers\) \| [^|]+ \| [^|]+ \| ([^|]+) \|", text)
        worst = max(float(value) for value in row.group(1).split("/"))
        assert 3 * worst < model_bounds.decode_error_bound(dtype, synthetic=True), dtype
    cosine_min = float(re.search(r"\| \(b\) continuation cosine \| ([0-9.]+) \|", text).group(1))
    top1_min = float(re.search(r"\| \(b\) continuation top-1 \| ([0-9.]+) \|", text).group(1))
    assert model_bounds.CONTINUATION_COSINE_LOW < cosine_min and model_bounds.CONTINUATION_TOP1_LOW < top1_min
    # A checkpoint's looser bound still sits well under what a broken decoding kernel gave (0.43 and more).
    assert model_bounds.decode_error_bound("float16", synthetic=False) < 0.43 / 4
