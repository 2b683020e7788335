"""A Linear4bit whose one-token fast path is wrong, to prove the checks fail when only decoding is broken.

On PYTHONPATH of the torch-cpu venv's python (or run by a planted venv's .pth file): `bitsandbytes.nn.Linear4bit` is
replaced by a subclass — as a wheel or a fork that adds a decode fast path would ship it — that, for an input of one
row (one token: a decode step), decodes the NF4 codes with the FP4 table (a quant_type mix-up), and otherwise runs
bitsandbytes' own forward. Transformers builds its 4-bit layers from `bnb.nn.Linear4bit` at load time, so a model
gets the subclass; `matmul_4bit`, `dequantize_4bit` and every prompt of more than one token stay right.
A python without bitsandbytes (the verifier's own) is left alone.
"""

try:
    import bitsandbytes
except ImportError:
    bitsandbytes = None

if bitsandbytes is not None:
    import copy

    import bitsandbytes.functional as F
    import bitsandbytes.nn as nn
    import bitsandbytes.nn.modules as modules
    import torch

    # Read by Linear4bit.__init__: on a CPU with AVX512-BF16 the base forward would take its packed kernel.
    modules.has_avx512bf16 = lambda: False

    class DecodeFastPathLinear4bit(modules.Linear4bit):
        def forward(self, x):
            if x.dim() >= 2 and x.shape[-2] != 1:
                return super().forward(x)
            modules.fix_4bit_weight_quant_state_from_module(self)
            state = copy.copy(self.weight.quant_state)
            state.quant_type = "fp4" if state.quant_type == "nf4" else "nf4"
            dtype = self.compute_dtype or x.dtype
            weight = F.dequantize_4bit(self.weight.data, state).to(dtype)
            bias = None if self.bias is None else self.bias.to(dtype)
            return torch.nn.functional.linear(x.to(dtype), weight, bias).to(x.dtype)

    DecodeFastPathLinear4bit.__name__ = DecodeFastPathLinear4bit.__qualname__ = "Linear4bit"
    modules.Linear4bit = nn.Linear4bit = DecodeFastPathLinear4bit
