"""Benchmark (not a test): the measurements behind the NF4 smoke's kernel and quantization bounds (checks/nf4.py).

    .venv/bin/python bench/nf4_kernel_bound.py [--venv VENV] [--seeds N]

With the real torch 2.13.0 (CPU) and bitsandbytes 0.50.1 (the test venv `torch-cpu`, built on first use), it prints:
  (a) the probe's own matrix (verify/checks/runtime_probe.py's `_run_group`: matmul_4bit and Linear4bit, fp16/bf16,
      double quantization on/off, M 1-64) over N seeds and several weight shapes — the probe's (256 x 256, 256 x 288)
      and larger ones (1024 x 1024, 512 x 4096: a long K) — worst kernel error in unit roundoffs of the dtype, and
      the range of the quantization error;
  (b) the same data through an emulation of bitsandbytes' fused SIMT kernel's arithmetic (csrc/gemm_4bit_simt.cu:
      the NF4 centroid and the block's scale rounded to the dtype, their product rounded, each x * w product rounded,
      fp32 accumulation, the output rounded): what a correct fused kernel of that design reaches in the same units;
  (c) the real probe, a fresh process per stand-in of tests/support/standins/ (faults planted where a broken wheel has
      them), judged by nf4.py: the worst kernel error as a share of its bound, the quantization error, the verdict.
The numbers go to docs/verification-gpu-kernels.md. A few minutes of one CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verify.checks import nf4  # noqa: E402

PROBE = REPO / "verify" / "checks" / "runtime_probe.py"
STANDINS = REPO / "tests" / "support" / "standins"
SHAPES = ((256, 256), (256, 288), (1024, 1024), (512, 4096))  # (N, K)
BOUND = 8 * 2**-8
FAULTS = (
    ("healthy venv", None, {}),
    ("control: a fused path registered, nothing broken", "broken_4bit_matmul", {"STANDIN_FAULT": "none"}),
    ("M = 1 only (scales of the next block)", "broken_4bit_matmul", {"STANDIN_FAULT": "rows-1"}),
    ("M <= 8 (outputs rotated)", "broken_4bit_matmul", {"STANDIN_FAULT": "rows-8"}),
    ("bf16 only (nibbles swapped)", "broken_4bit_matmul", {"STANDIN_FAULT": "bfloat16"}),
    ("double quant only (offset lost)", "broken_4bit_matmul", {"STANDIN_FAULT": "double-quant"}),
    *(
        (
            f"one output per fused call moved by {share} x the fp16 bound ({direction})",
            "broken_4bit_matmul",
            {
                "STANDIN_FAULT": "size",
                "STANDIN_FAULT_SIZE": repr(share * 8 * 2**-11),
                "STANDIN_FAULT_ROUND": direction,
            },
        )
        for share, direction in ((1.0, "down"), (1.0, "up"), (0.5, "up"), (2.0, "up"))
    ),
    ("Linear4bit subclass wrong for one-token inputs", "decode_only_linear4bit", {}),
    ("no-op quantizer", "broken_nf4_quantizer", {}),
    ("NF4 codes read with the FP4 table", "wrong_nf4_dequantizer", {}),
    ("each block's scale from the next block", "wrong_nf4_dequantizer", {"STANDIN_DEQUANTIZER": "shifted-scales"}),
)

# Runs in the venv's python: the probe's own group runner over seeds and shapes, plus the SIMT emulation.
DRIVER = r"""
import json, sys
probe = {"__name__": "runtime_probe"}
exec(compile(sys.stdin.read(), "runtime_probe.py", "exec"), probe)
import torch, bitsandbytes as bnb, bitsandbytes.functional as F
torch.set_num_threads(1)
seeds, shapes = json.loads(sys.argv[1]), json.loads(sys.argv[2])
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


def simt(x, packed, state, dtype):
    # bitsandbytes' SIMT kernel, step by step in the dtype: centroid, scale, their product, x * w; fp32 sums.
    n, k = state.shape
    flat = packed.reshape(-1)
    codes = torch.stack([flat >> 4, flat & 15], -1).reshape(-1)[: n * k].long()
    absmax = state.absmax
    if state.nested:
        absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
    scale = absmax.float()[torch.arange(n * k) // state.blocksize].to(dtype)
    weight = (state.code.to(dtype)[codes] * scale).reshape(n, k)
    return torch.stack([(row * weight).float().sum(-1) for row in x]).to(dtype)


dispatch = probe["Dispatch"](torch, "cpu")
for seed in seeds:
    generator = torch.Generator().manual_seed(seed)
    for n, k in shapes:
        for dtype_name in probe["PATH_DTYPES"]:
            dtype = getattr(torch, dtype_name)
            for double in probe["PATH_DOUBLE_QUANT"]:
                weight = torch.randn(n, k, generator=generator) * 0.05
                inputs = torch.randn(max(probe["PATH_ROWS"]), k, generator=generator)
                for api in probe["PATH_APIS"]:
                    cases = []
                    with torch.no_grad():
                        probe["_run_group"](torch, bnb, "cpu", dispatch, api, weight, inputs, dtype, double, cases)
                    print(json.dumps({"kind": "probe", "seed": seed, "n": n, "k": k, "cases": cases}), flush=True)
                packed, state = F.quantize_4bit(weight.to(dtype), blocksize=64, quant_type="nf4",
                                                compress_statistics=double)
                restored = F.dequantize_4bit(packed, state).float()
                worst = 0.0
                for rows in probe["PATH_ROWS"]:
                    x = inputs[:rows].to(dtype)
                    got = simt(x, packed, state, dtype).float()
                    wide = x.float()
                    error = ((got - wide @ restored.t()).abs() / (wide.abs() @ restored.abs().t())).max().item()
                    worst = max(worst, error / UNIT[dtype_name])
                print(json.dumps({"kind": "simt", "seed": seed, "n": n, "k": k, "dtype": dtype_name,
                                  "double_quant": double, "worst_units": worst}), flush=True)
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")}
    env.update(extra)
    return env


def print_matrix(python: Path, seeds: list[int]) -> None:
    done = subprocess.run(
        [str(python), "-B", "-c", DRIVER, json.dumps(seeds), json.dumps(SHAPES)],
        input=PROBE.read_text(),
        capture_output=True,
        text=True,
        env=clean_env(OMP_NUM_THREADS="1"),
        cwd="/",
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.exit(f"no result:\n{done.stderr[-3000:]}")
    print(f"(a) the probe's matmuls, {len(seeds)} seeds; kernel error in unit roundoffs of the dtype (bound 8)")
    print("| N x K | dtype | worst kernel error (units) | median | quantization error | cases |")
    print("|---|---|---|---|---|---|")
    for n, k in SHAPES:
        for dtype in nf4.PATH_DTYPES:
            unit = nf4.UNIT_ROUNDOFF[dtype]
            cases = [c for r in rows if r["kind"] == "probe" and (r["n"], r["k"]) == (n, k) for c in r["cases"]]
            cases = [c for c in cases if c["dtype"] == dtype]
            kernel = sorted(c["kernel_error"] / unit for c in cases)
            quant = [c["quantization_error"] for c in cases]
            print(
                f"| {n} x {k} | {dtype} | {kernel[-1]:.3f} | {kernel[len(kernel) // 2]:.3f} | "
                f"{min(quant):.4f}-{max(quant):.4f} | {len(cases)} |"
            )
    print("\n(b) bitsandbytes' SIMT kernel arithmetic, emulated on the same data: worst kernel error (units)")
    print("| N x K | dtype | double quant | worst over seeds and M |")
    print("|---|---|---|---|")
    for n, k in SHAPES:
        for dtype in nf4.PATH_DTYPES:
            for double in (False, True):
                found = [
                    r["worst_units"]
                    for r in rows
                    if r["kind"] == "simt" and (r["n"], r["k"], r["dtype"], r["double_quant"]) == (n, k, dtype, double)
                ]
                print(f"| {n} x {k} | {dtype} | {double} | {max(found):.3f} |")


def print_faults(python: Path) -> None:
    print("\n(c) the real probe (runtime_probe.py, --device cpu), one process per stand-in, judged by nf4.py")
    print("| venv | worst kernel error / bound | quantization error | verdict |")
    print("|---|---|---|---|")
    for label, standin, env in FAULTS:
        extra = dict(env, OMP_NUM_THREADS="1")
        if standin:
            extra["PYTHONPATH"] = str(STANDINS / standin)
        done = subprocess.run(
            [str(python), "-B", "-", "--device", "cpu"],
            input=PROBE.read_text(),
            capture_output=True,
            text=True,
            env=clean_env(**extra),
            cwd="/",
        )
        report = json.loads(done.stdout.splitlines()[-1])
        run = report["nf4"][0]
        summary = nf4.paths_summary(run["paths"])
        ok, problems = nf4.judge_nf4(run)
        quantization = summary["quantization"]
        share = summary["worst_of_bound"]
        print(
            f"| {label} | {'-' if share is None else f'{share:.3f}'} | "
            f"{'-' if quantization is None else f'{quantization[0]:.3f}-{quantization[1]:.3f}'} | "
            f"{'pass' if ok else 'FAIL: ' + problems[0][:160]} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="a venv with torch and bitsandbytes")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--skip-matrix", action="store_true", help="only (c)")
    args = parser.parse_args()
    if args.venv is None:
        from tests.support.verify_runs import torch_cpu_venv

        args.venv = torch_cpu_venv()
    python = args.venv / "bin" / "python"
    if not args.skip_matrix:
        print_matrix(python, list(range(args.seeds)))
    print_faults(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
