"""A deliberately broken NF4 quantizer, to prove the NF4 check can fail.

On PYTHONPATH of the torch-cpu venv's python: bitsandbytes' real `quantize_4bit` is replaced by one that returns its
input unchanged (with the real quantization state), and `dequantize_4bit` by one that returns the "packed" tensor as
is — a quantizer that silently does nothing. Everything else is the real torch 2.13.0 and bitsandbytes 0.50.1.
A python without bitsandbytes (the verifier's own) is left alone.
"""

try:
    import bitsandbytes.functional as functional
except ImportError:
    functional = None

if functional is not None:
    real_quantize = functional.quantize_4bit

    def quantize_that_does_nothing(A, *args, **kwargs):
        _, state = real_quantize(A, *args, **kwargs)
        return A.clone(), state

    def dequantize_that_does_nothing(A, quant_state=None, *args, **kwargs):
        return A.clone()

    functional.quantize_4bit = quantize_that_does_nothing
    functional.dequantize_4bit = dequantize_that_does_nothing
