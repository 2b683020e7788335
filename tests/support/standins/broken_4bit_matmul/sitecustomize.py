"""A 4-bit matmul broken on one path only, planted where a broken wheel breaks it — bitsandbytes' kernel for the op
`bitsandbytes::gemm_4bit` — to prove that the NF4 smoke and the model check fail when one path of generation is wrong.

On PYTHONPATH of the torch-cpu venv's python (or run by a planted venv's .pth file). bitsandbytes 0.50.1 has no CPU
kernel for gemm_4bit: on this CPU every 4-bit inference matmul dequantizes and calls F.linear. On a GPU its kernel
takes a fused path for small M, the rows (tokens) of the step — ROCm on gfx11/gfx12: M <= 8 when K is a multiple of
the blocksize — and dequantizes above. This stand-in registers a CPU kernel for the op that dispatches the same way,
computes with bitsandbytes' own default implementation (the right numbers), and breaks its fused path as STANDIN_FAULT
says:
    none          nothing is broken: the control (the registered kernel alone changes no number)
    rows-1        M = 1 only — the GEMV every decode step takes: each block's scale from the next block
                  (#1887's class)
    rows-8        the whole fused path, M <= 8: each output from its neighbour's weight row (#2087: "unrelated")
    bfloat16      bf16 only: the two 4-bit codes of each byte swapped
    double-quant  double quantization only: the absmax offset forgotten
    size          one output of each fused call moved from x @ dequantize_4bit(w).T by STANDIN_FAULT_SIZE x
                  sum_k |x_k||w_k| — the NF4 smoke's unit of kernel error —, at least that (STANDIN_FAULT_ROUND=up,
                  the default) or just under it (down): to show that its bound lies exactly where it says
dequantize_4bit and every matmul past M = 8 stay right: a check that multiplies 64 rows, or compares a prefill's
logits, sees nothing. bitsandbytes' packed AVX512-BF16 CPU path (which bypasses gemm_4bit in Linear4bit) is switched
off, as in ../wrong_nf4_dequantizer. A python without bitsandbytes (the verifier's own) is left alone.
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

    FAULT = os.environ.get("STANDIN_FAULT", "none")
    SIZE = float(os.environ.get("STANDIN_FAULT_SIZE", "0"))
    ROUND = os.environ.get("STANDIN_FAULT_ROUND", "up")
    FUSED_MAX_ROWS = 8  # bitsandbytes' ROCm dispatch on gfx11/gfx12
    right = default_ops._gemm_4bit_default_impl

    # Read by Linear4bit.__init__: every layer built after start-up goes through gemm_4bit.
    modules.has_avx512bf16 = lambda: False

    def _broken_here(rows, dtype, nested):
        if FAULT == "rows-1":
            return rows == 1
        if FAULT == "bfloat16":
            return dtype == torch.bfloat16
        if FAULT == "double-quant":
            return nested
        return FAULT in ("rows-8", "size")

    def _moved_by_size(A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code, absmax_offset):
        out = right(A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code, absmax_offset)
        if absmax_8bit is not None:
            absmax = (
                torch.ops.bitsandbytes.dequantize_blockwise.default(
                    absmax_8bit, absmax, absmax_code, 256, torch.float32
                )
                + absmax_offset
            )
        weight = torch.ops.bitsandbytes.dequantize_4bit.default(B, absmax, blocksize, quant_type, shapeB, A.dtype)
        rows = A.reshape(-1, A.shape[-1]).float()
        flat = out.reshape(-1, shapeB[0])
        i, j = rows.shape[0] - 1, shapeB[0] // 2
        exact = rows[i] @ weight[j].float() + (0.0 if bias is None else float(bias[j]))
        step = SIZE * float(rows[i].abs() @ weight[j].float().abs())
        moved = torch.tensor(exact + step, dtype=torch.float32).to(out.dtype)
        # Rounding to the output's dtype moves it by up to half a unit: one unit on, so that the fault is exactly
        # at least (STANDIN_FAULT_ROUND=up) or strictly less than (down) SIZE.
        if ROUND == "up" and float(moved) - exact < step:
            moved = torch.nextafter(moved, torch.tensor(float("inf"), dtype=out.dtype))
        if ROUND == "down" and float(moved) - exact >= step:
            moved = torch.nextafter(moved, torch.tensor(float("-inf"), dtype=out.dtype))
        flat[i, j] = moved
        return out

    def gemm_4bit(
        A, B, shapeB, absmax, blocksize, quant_type, bias=None, absmax_8bit=None, absmax_code=None, absmax_offset=None
    ):
        inner = A.shape[-1]
        rows = A.numel() // inner
        fused = rows <= FUSED_MAX_ROWS and inner % blocksize == 0
        if not fused or not _broken_here(rows, A.dtype, absmax_8bit is not None):
            return right(A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code, absmax_offset)
        if FAULT == "size":
            return _moved_by_size(
                A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code, absmax_offset
            )
        if FAULT == "rows-1":
            if absmax_8bit is not None:
                absmax_8bit = torch.roll(absmax_8bit, 1)
            else:
                absmax = torch.roll(absmax, 1)
        elif FAULT == "bfloat16":
            codes = B.view(torch.uint8)
            B = ((codes & 0x0F) << 4) | (codes >> 4)
        elif FAULT == "double-quant":
            absmax_offset = torch.zeros_like(absmax_offset)
        out = right(A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code, absmax_offset)
        if FAULT == "rows-8":
            out = torch.roll(out, 1, dims=-1)
        return out

    torch.library.register_kernel("bitsandbytes::gemm_4bit", "cpu")(gemm_4bit)
