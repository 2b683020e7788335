"""Regenerates the real probe outputs among these cases: the model probe run on the CPU in the real venv of
tests/support/venvs.py (torch 2.13.0 CPU, bitsandbytes 0.50.1, the pinned Transformers), as nobody, with and without
the fault stand-ins. Tracebacks are dropped and the process details (executable, pid, uid) made neutral; the
measured numbers are kept as they came.

    .venv/bin/python tests/verify/checks/data/model/capture.py

A case keeps its expected checks: after a capture, read the new reasons (tokens/s moves from run to run) and update
them by hand. The other cases (GPUs, checkpoints, broken runs) are written by hand from these, each saying so in its
description.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[4]
sys.path.insert(0, str(REPO))

from tests.support.venvs import planted_venv, transformers_venv  # noqa: E402
from verify.checks.model import ModelExpectations, run_model_probe  # noqa: E402
from verify.checks.probe_account import ProbeAccount  # noqa: E402

STANDINS = REPO / "tests" / "support" / "standins"
CAPTURES = {
    "cpu_synthetic_pass": (None, {}, "the real probe on this machine's CPU, the check's synthetic model"),
    "cpu_noop_quantizer": (
        "broken_nf4_quantizer",
        {},
        "the real probe with standins/broken_nf4_quantizer: bitsandbytes' "
        "quantize_4bit does nothing, so the weights stay in 16 bits",
    ),
    "cpu_wrong_dequantizer": (
        "wrong_nf4_dequantizer",
        {},
        "the real probe with standins/wrong_nf4_dequantizer: NF4 codes decoded with the FP4 table",
    ),
    "cpu_decoding_kernel_broken": (
        "broken_4bit_matmul",
        {"STANDIN_FAULT": "rows-1"},
        "the real probe with standins/broken_4bit_matmul (STANDIN_FAULT=rows-1): bitsandbytes' gemm_4bit wrong for "
        "one-row inputs only — every decode step; the prompt's logits are those of the healthy run",
    ),
    "cpu_decode_only_linear4bit": (
        "decode_only_linear4bit",
        {},
        "the real probe with standins/decode_only_linear4bit: a Linear4bit subclass that decodes one-token inputs with "
        "the FP4 table",
    ),
}


def neutral(data: dict) -> dict:
    data.update(executable="/opt/rocm-fleet/venv/bin/python", pid=0, uid=1000)
    for device in data.get("devices", []):
        device.get("errors", {}).pop("4-bit model (traceback)", None)
    data.get("errors", {}).pop("probe (traceback)", None)
    return data


def main() -> int:
    want = ModelExpectations("synthetic", "cpu")
    nobody = ProbeAccount.of(pwd.getpwnam("nobody"))  # the stand-in for venv_owner
    parent = Path(tempfile.mkdtemp(prefix="model-capture-"))
    parent.chmod(0o755)
    try:
        return capture(want, nobody, parent)
    finally:
        shutil.rmtree(parent)


def capture(want: ModelExpectations, nobody: ProbeAccount, parent: Path) -> int:
    for name, (standin, environ, description) in CAPTURES.items():
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OMP_NUM_THREADS")}
        python = transformers_venv() / "bin" / "python"
        if standin:
            planted = {"OMP_NUM_THREADS": "1", **environ}
            python = planted_venv(parent / name, STANDINS / standin / "sitecustomize.py", planted)
        run = run_model_probe(python, want, account=nobody, env=env)
        if run.data is None:
            sys.exit(f"{name}: {run.error}")
        path = HERE / f"{name}.json"
        case = json.loads(path.read_text()) if path.exists() else {"checks": []}
        case.update(description=description, expect={"source": "synthetic", "device": "cpu"}, probe=neutral(run.data))
        path.write_text(json.dumps(case, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
