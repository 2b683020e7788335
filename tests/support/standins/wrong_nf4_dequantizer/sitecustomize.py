"""A deliberately wrong NF4 dequantizer, to prove the model check can fail.

On PYTHONPATH of the torch-cpu venv's python: bitsandbytes' CPU kernel for `bitsandbytes::dequantize_4bit` is
replaced by one that decodes the 4-bit codes with the other 4-bit table (NF4 data read as FP4 — a real class of bug:
bitsandbytes' own default quant_type is "fp4"); quantization, storage and everything else are the real torch 2.13.0
and bitsandbytes 0.50.1. bitsandbytes' packed AVX512-BF16 CPU path (which decodes inside its own fused kernel) is
switched off, so every 4-bit matmul dequantizes — as it does on a CPU without AVX512-BF16.
`STANDIN_DEQUANTIZER=real` keeps that path switch and the real dequantizer: the control that shows the failure comes
from the wrong table, not from the path. `STANDIN_DEQUANTIZER=shifted-scales` decodes with the right table but each
block's scale taken from the next block — a subtle fault, for bench/model_bounds.py's sensitivity table.
A python without bitsandbytes (the verifier's own) is left alone.
"""

import os

try:
    import bitsandbytes
except ImportError:
    bitsandbytes = None

if bitsandbytes is not None:
    import bitsandbytes.nn.modules as modules
    import torch
    from bitsandbytes.backends.default import ops as default_ops
    from bitsandbytes.backends.utils import _get_4bit_code

    # bitsandbytes' own Python decoder, without its torch.compile wrapper (which would build C++ kernels with gcc:
    # minutes on a busy machine, and not the path under test).
    decode = getattr(default_ops._dequantize_4bit_compute, "__wrapped__", default_ops._dequantize_4bit_compute)

    # Read by Linear4bit.__init__, so every layer built after start-up takes the dequantizing path.
    modules.has_avx512bf16 = lambda: False

    mode = os.environ.get("STANDIN_DEQUANTIZER", "wrong-table")

    def wrong_dequantize(A, absmax, blocksize, quant_type, shape, dtype):
        if A.dtype != torch.uint8:
            A = A.view(torch.uint8)
        absmax = absmax.float()
        if mode == "shifted-scales":
            table = quant_type
            absmax = torch.roll(absmax, 1)
        else:
            table = "fp4" if quant_type == "nf4" else "nf4"
        return decode(A.reshape(-1), absmax, _get_4bit_code(table, A.device), blocksize, shape, dtype)

    if mode != "real":
        torch.library.register_kernel("bitsandbytes::dequantize_4bit", "cpu")(wrong_dequantize)
