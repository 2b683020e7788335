"""Benchmark (not a test): the measurements behind verify/checks/model_bounds.py, and what the model check costs.

    .venv/bin/python bench/model_bounds.py [--venv VENV] [--seeds N] [--timing-runs N]

With the real torch 2.13.0 (CPU), bitsandbytes 0.50.1 and the pinned Transformers (the test venv
`torch-cpu-transformers`, built on first use), it measures, on the CPU:
  (a) synthetic models of several shapes x N seeds x both 16-bit dtypes (bfloat16, the CPU's; float16, a GPU's), all
      in one venv process (the probe's own functions, loaded from verify/checks/model_probe.py): footprint ratio
      against the band model_bounds derives from the parameter split, logits cosine and top-1 agreement with the
      16-bit reference, identical greedy generations, and generation itself: one-token decoding through the KV cache
      against a forward pass of the same 4-bit model (worst position's relative error), the continuation's top-1
      agreement and cosine with the reference teacher-forced on it;
  (b) the default synthetic check with injected faults, each a fresh probe process as the verifier starts it, with a
      stand-in from tests/support/standins/ on PYTHONPATH: a quantizer that does nothing, a dequantizer that reads NF4
      codes with the FP4 table, a subtle one (each block's scale from the next block), the control (the same
      dequantizing path, real dequantizer); and faults of one path of generation (broken_4bit_matmul: M = 1 only,
      M <= 8, bf16 only, double quantization only, one output of each fused call moved by the NF4 smoke's kernel
      bound; decode_only_linear4bit), with their control;
  (c) the time of the default synthetic check, as the verifier runs it: a fresh process, wall seconds from outside
      (interpreter start and imports included) and the probe's own CPU seconds and import time, best and median;
  (d) what an unquantized model gives: the check's model in each 16-bit dtype against float32 (the cosine a 4-bit
      model must stay clearly under).
Keep it modest on a shared machine: the defaults take a few minutes of one CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verify.checks import model_bounds  # noqa: E402
from verify.checks.model import probe_arguments, probe_source  # noqa: E402

STANDINS = REPO / "tests" / "support" / "standins"
# (layers, hidden, vocab): the default, a smaller, a wider and a deeper model with a larger vocabulary.
SHAPES = ((4, 512, 1024), (2, 256, 512), (4, 768, 2048), (8, 512, 4096))
DTYPES = ("bfloat16", "float16")
FAULTS = (
    ("control: dequantizing path, real dequantizer", "wrong_nf4_dequantizer", {"STANDIN_DEQUANTIZER": "real"}),
    ("wrong dequantizer: NF4 codes read with the FP4 table", "wrong_nf4_dequantizer", {}),
    (
        "subtle: each block's scale from the next block",
        "wrong_nf4_dequantizer",
        {"STANDIN_DEQUANTIZER": "shifted-scales"},
    ),
    ("no-op quantizer (weights kept in 16 bits)", "broken_nf4_quantizer", {}),
    ("control: a fused path registered, nothing broken", "broken_4bit_matmul", {"STANDIN_FAULT": "none"}),
    ("fused path broken for M = 1 only (scales of the next block)", "broken_4bit_matmul", {"STANDIN_FAULT": "rows-1"}),
    ("fused path broken for M <= 8 (outputs rotated)", "broken_4bit_matmul", {"STANDIN_FAULT": "rows-8"}),
    ("fused path broken for bf16 only (nibbles swapped)", "broken_4bit_matmul", {"STANDIN_FAULT": "bfloat16"}),
    ("fused path broken for double quant only (offset lost)", "broken_4bit_matmul", {"STANDIN_FAULT": "double-quant"}),
    (
        "fused path: one output per call moved by the NF4 kernel bound (8 bf16 units)",
        "broken_4bit_matmul",
        {"STANDIN_FAULT": "size", "STANDIN_FAULT_SIZE": str(8 * 2**-8)},
    ),
    ("Linear4bit subclass wrong for one-token inputs", "decode_only_linear4bit", {}),
)

# Runs in the venv's python: the probe's own functions, one configuration after another (one import for all).
DRIVER = r"""
import json, os, shutil, sys, tempfile
os.environ.setdefault("OMP_NUM_THREADS", "1")
source = sys.stdin.read()
probe = {"__name__": "model_probe"}
exec(compile(source, "model_probe.py", "exec"), probe)
os.environ.update(probe["OFFLINE_ENV"])
configs = json.loads(sys.argv[1])
for argv in configs:
    args = probe["parse_args"](argv)
    workdir = tempfile.mkdtemp(prefix="model-bounds-")
    os.environ["HF_HOME"] = os.path.join(workdir, "hf-home")
    result = {"errors": {}}
    try:
        probe["run"](args, result, workdir)
    except Exception as error:
        result["errors"]["probe"] = probe["one_line"](error)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps({"argv": argv, "result": result}), file=sys.__stdout__, flush=True)
"""


# Runs in the venv's python: the check's synthetic model in 16 bits against float32, nothing quantized.
UNQUANTIZED = r"""
import json, os, shutil, sys, tempfile
os.environ.setdefault("OMP_NUM_THREADS", "1")
probe = {"__name__": "model_probe"}
exec(compile(sys.stdin.read(), "model_probe.py", "exec"), probe)
os.environ.update(probe["OFFLINE_ENV"])
import torch, transformers
args = probe["parse_args"](sys.argv[1:])
workdir = tempfile.mkdtemp(prefix="model-bounds-")
try:
    probe["build_synthetic"](torch, transformers, args, workdir)
    generator = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(3, args.vocab, (1, args.prompt_tokens), generator=generator)
    cpu = probe["Device"]("cpu")
    logits = {}
    for name in ("float32", "bfloat16", "float16"):
        model = probe["load"](transformers, workdir, cpu, getattr(torch, name))
        logits[name] = probe["logits_of"](torch, model, cpu, prompt)
    for name in ("bfloat16", "float16"):
        cosine, top1 = probe["compare"](torch, logits[name], logits["float32"])
        print(json.dumps({"dtype": name, "cosine": cosine, "top1": top1}), file=sys.__stdout__, flush=True)
finally:
    shutil.rmtree(workdir, ignore_errors=True)
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")}
    env.update(extra)
    return env


def sweep(python: Path, seeds: list[int]) -> list[dict]:
    configs = []
    for layers, hidden, vocab in SHAPES:
        for seed in seeds:
            for dtype in DTYPES:
                configs.append(
                    [
                        "--device",
                        "cpu",
                        "--layers",
                        str(layers),
                        "--hidden",
                        str(hidden),
                        "--vocab",
                        str(vocab),
                        "--seed",
                        str(seed),
                        "--dtype",
                        dtype,
                        *model_bounds.PROMPT_ARGUMENTS,
                    ]
                )
    done = subprocess.run(
        [str(python), "-B", "-c", DRIVER, json.dumps(configs)],
        input=probe_source(),
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd="/",
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(configs):
        sys.exit(f"the sweep stopped after {len(rows)} of {len(configs)} runs:\n{done.stderr[-3000:]}")
    return rows


def probe_once(python: Path, standin: str | None = None, **env: str) -> dict:
    extra = dict(env)
    if standin:
        extra["PYTHONPATH"] = str(STANDINS / standin)
    done = subprocess.run(
        [str(python), "-B", "-", *probe_arguments("cpu")],
        input=probe_source(),
        capture_output=True,
        text=True,
        env=clean_env(**extra),
        cwd="/",
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.exit(f"the probe produced no report:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def measures(result: dict) -> dict:
    """One device's numbers, with the ratio and the band the judge would use."""
    device = (result.get("devices") or [{}])[0]
    row = {
        "errors": {
            k: v for k, v in {**result.get("errors", {}), **device.get("errors", {})}.items() if "traceback" not in k
        }
    }
    ratio = model_bounds.footprint_ratio(device)
    band = model_bounds.expected_ratio_band(device)
    row.update(
        ratio=ratio,
        band=band,
        cosine=device.get("logits_cosine"),
        top1=device.get("top1_agreement"),
        identical=device.get("generation_identical"),
        tokens_per_s=device.get("tokens_per_s"),
        decode=device.get("incremental_decode_error"),
        cont_top1=device.get("continuation_top1"),
        cont_cosine=device.get("continuation_cosine"),
    )
    ok, problems = model_bounds.judge_model_run(device, synthetic=True)
    row["verdict"] = "pass" if ok else "FAIL: " + "; ".join(problems)
    return row


def fmt(value, spec=".4f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="a venv with torch, bitsandbytes, transformers, accelerate")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per shape and dtype (default 5)")
    parser.add_argument("--timing-runs", type=int, default=3)
    parser.add_argument("--skip-sweep", action="store_true", help="only (b), (c) and (d)")
    args = parser.parse_args()
    if args.venv is None:
        from tests.support.venvs import transformers_venv

        args.venv = transformers_venv()
    python = args.venv / "bin" / "python"
    seeds = [model_bounds.SEED, *range(1, args.seeds)]

    if not args.skip_sweep:
        print_sweep(python, seeds)
    print_faults(python)
    print_timing(python, args.timing_runs)
    print_unquantized(python)
    return 0


def print_sweep(python: Path, seeds: list[int]) -> None:
    print(f"(a) synthetic models on the CPU: {len(SHAPES)} shapes x {len(seeds)} seeds x {len(DTYPES)} dtypes")
    print(
        "| layers x width, vocab | dtype | seed | footprint ratio | expected band | logits cosine | top-1 | "
        "decode error | continuation top-1 | continuation cosine | identical | tokens/s | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    by_key: dict[str, list[float]] = {"cosine": [], "top1": [], "decode": [], "cont_top1": [], "cont_cosine": []}
    by_dtype: dict[str, list[float]] = {}
    for row in sweep(python, seeds):
        argv = row["argv"]
        opts = dict(zip(argv[0::2], argv[1::2], strict=True))
        m = measures(row["result"])
        for key in by_key:
            if m[key] is not None:
                by_key[key].append(m[key])
        if m["decode"] is not None:
            by_dtype.setdefault(f"decode {opts['--dtype']} {opts['--layers']} layers", []).append(m["decode"])
        band = "-" if m["band"] is None else f"{m['band'][0]:.4f}-{m['band'][1]:.4f}"
        print(
            f"| {opts['--layers']} x {opts['--hidden']}, {opts['--vocab']} | {opts['--dtype']} | {opts['--seed']} | "
            f"{fmt(m['ratio'])} | {band} | {fmt(m['cosine'])} | {fmt(m['top1'], '.3f')} | {fmt(m['decode'])} | "
            f"{fmt(m['cont_top1'], '.3f')} | {fmt(m['cont_cosine'])} | {m['identical']} | "
            f"{fmt(m['tokens_per_s'], '.1f')} | {m['verdict'] if not m['errors'] else m['errors']} |"
        )
    for key, values in [*by_key.items(), *sorted(by_dtype.items())]:
        if values:
            print(
                f"{key}: min {min(values):.4f}, median {statistics.median(values):.4f}, max {max(values):.4f} "
                f"over {len(values)} runs"
            )


def print_faults(python: Path) -> None:
    print("\n(b) injected faults, default synthetic model, each a fresh probe process")
    print(
        "| fault | footprint ratio | logits cosine | top-1 | decode error | continuation top-1 | continuation cosine | "
        "identical | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, standin, env in FAULTS:
        m = measures(probe_once(python, standin, OMP_NUM_THREADS="1", **env))
        verdict = m["verdict"] if m["verdict"] != "pass" or not m["errors"] else f"errors {m['errors']}"
        print(
            f"| {label} | {fmt(m['ratio'])} | {fmt(m['cosine'])} | {fmt(m['top1'], '.3f')} | {fmt(m['decode'])} | "
            f"{fmt(m['cont_top1'], '.3f')} | {fmt(m['cont_cosine'])} | {m['identical']} | {verdict} |"
        )


def print_timing(python: Path, runs: int) -> None:
    print(f"\n(c) the default synthetic check as the verifier runs it, {runs} fresh processes")
    walls, cpus, imports = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        result = probe_once(python)
        walls.append(time.perf_counter() - start)
        cpus.append(result["cpu_s"])
        imports.append(result["import_ms"] / 1000)
        device = result["devices"][0]
        steps = ", ".join(f"{k} {v / 1000:.2f}" for k, v in device["timings_ms"].items())
        print(
            f"process wall {walls[-1]:.2f} s, probe CPU {result['cpu_s']:.2f} s: imports {imports[-1]:.2f}, "
            f"build {result['model']['build_ms'] / 1000:.2f}, {steps}"
        )
    print(
        f"process wall: best {min(walls):.2f} s, median {statistics.median(walls):.2f} s; probe CPU: best "
        f"{min(cpus):.2f} s, median {statistics.median(cpus):.2f} s; imports (wall): best {min(imports):.2f} s"
    )


def print_unquantized(python: Path) -> None:
    print("\n(d) the check's model unquantized: 16-bit logits against float32")
    done = subprocess.run(
        [str(python), "-B", "-c", UNQUANTIZED, *model_bounds.SYNTHETIC_ARGUMENTS],
        input=probe_source(),
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd="/",
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.exit(f"no result:\n{done.stderr[-3000:]}")
    for row in rows:
        print(f"{row['dtype']}: cosine {row['cosine']:.6f}, top-1 {row['top1']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
