"""verify/checks/model.py (and model_probe.py, which it runs): the model check against the real torch 2.13.0 (CPU),
bitsandbytes 0.50.1 and the pinned Transformers, run as the venv's owner would run it (here: nobody).

What is deliberately broken: the quantizer (standins/broken_nf4_quantizer: it does nothing) and the dequantizer
(standins/wrong_nf4_dequantizer: NF4 codes read with the FP4 table), planted as the venv's owner could plant them — a
.pth file in a venv of the owner's that runs the stand-in at start-up (PYTHONPATH would not do: the probe gets the
owner's environment, not the caller's, verify/checks/probe_account.py). What is mocked, and only there: the GPU — the
`*_through_a_mocked_gpu_boundary` tests replace the probe's one device boundary (name, arch, total and peak memory)
while every tensor stays on the CPU, because no GPU exists here. The judging itself is tested on JSON cases in
test_model_cases.py.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import pytest

from tests.support.venvs import planted_venv, transformers_venv
from tests.support.verify_runs import check_by_id, run_check
from verify.checks import model, model_bounds, nf4
from verify.checks.host import CheckOptions, Host
from verify.checks.model import ModelExpectations, judge_model, probe_arguments, probe_source, run_model_probe
from verify.checks.probe_account import ProbeAccount
from verify.checks.runtime import ProbeRun, run_script
from verify.report.report import FAIL, PASS, SKIP, WARN, CheckResult, judge_report, load_schema

STANDINS = Path(__file__).resolve().parents[2] / "support" / "standins"
OWNER = ProbeAccount.of(pwd.getpwnam("nobody"))  # the stand-in for venv_owner
SYNTHETIC_CPU = ModelExpectations("synthetic", "cpu")


def _python() -> Path:
    return transformers_venv() / "bin" / "python"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def planted():
    """planted(standin, **environ): the python of a venv with `standin` planted (tests/support/venvs.planted_venv),
    readable by nobody; the stand-ins import torch at start-up, before the probe can ask OpenMP for one thread: one
    thread is set there too. Removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="model-planted-"))
    parent.chmod(0o755)  # mkdtemp's 0700 would keep nobody out
    made: dict[tuple, Path] = {}

    def make(standin: str, **environ: str) -> Path:
        key = (standin, tuple(sorted(environ.items())))
        if key not in made:
            made[key] = planted_venv(
                parent / f"venv{len(made)}", STANDINS / standin / "sitecustomize.py", dict(environ, OMP_NUM_THREADS="1")
            )
        return made[key]

    yield make
    shutil.rmtree(parent)


_RUNS: dict[tuple, ProbeRun] = {}


def _run(want: ModelExpectations, python: Path | None = None) -> ProbeRun:
    """One real probe run as nobody, once per test session for the same inputs."""
    python = python or _python()
    key = (want, python)
    if key not in _RUNS:
        _RUNS[key] = run_model_probe(python, want, account=OWNER, env=_env())
    return _RUNS[key]


def _only(checks, check_id):
    assert [c.id for c in checks] == [check_id], [(c.id, c.status, c.reason) for c in checks]
    return checks[0]


@pytest.mark.slow
def test_synthetic_model_on_cpu_passes_within_bounds_and_says_it_is_not_a_gpu_pass():
    run = _run(SYNTHETIC_CPU)
    assert run.data is not None, run.error
    assert run.data["uid"] == 65534  # it ran as nobody, the stand-in for venv_owner
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == PASS, check.reason
    assert check.reason.endswith("— CPU run, not a GPU pass")
    evidence = check.evidence
    assert evidence["gpu_pass"] is False and evidence["dtype"] == "bfloat16"
    assert evidence["quant_types"] == ["nf4"]
    low, high = evidence["expected_ratio_band"]
    assert low <= evidence["footprint_ratio"] <= high
    assert model_bounds.COSINE_LOW < evidence["logits_cosine"] < model_bounds.COSINE_HIGH
    assert evidence["top1_agreement"] >= model_bounds.TOP1_LOW
    first, second = evidence["generated"]
    assert first == second and len(first) == model_bounds.NEW_TOKENS
    assert evidence["peak_memory_4bit"] is None  # no device memory on the CPU
    assert evidence["versions"]["transformers"] == "5.24.0" and evidence["versions"]["bitsandbytes"] == "0.50.1"
    assert evidence["model"]["config"]["hidden_size"] == model_bounds.HIDDEN
    # Generation itself: one-token decoding agrees with a forward pass of the same model up to bf16 rounding, and the
    # reference, teacher-forced on the generated tokens, agrees with them.
    assert evidence["decode_finite"] is True
    assert 0 < evidence["incremental_decode_error"] < model_bounds.decode_error_bound("bfloat16", True) / 2
    assert evidence["continuation_cosine"] > model_bounds.CONTINUATION_COSINE_LOW
    assert evidence["continuation_top1"] >= model_bounds.CONTINUATION_TOP1_LOW
    assert "one-token decoding = full forward within " in check.reason and "continuation top-1 " in check.reason


@pytest.mark.slow
def test_synthetic_model_is_the_same_on_every_run():
    """A fixed seed: the same weights, prompt and tokens whoever builds it (a second, independent process)."""
    first = _run(SYNTHETIC_CPU).data["devices"][0]
    again = run_model_probe(_python(), SYNTHETIC_CPU, account=OWNER, env=_env()).data["devices"][0]
    for key in ("footprint_4bit", "footprint_reference", "logits_cosine", "top1_agreement", "generated"):
        assert again[key] == first[key], key


@pytest.mark.slow
def test_model_check_fails_when_the_quantizer_does_nothing(planted):
    run = _run(SYNTHETIC_CPU, planted("broken_nf4_quantizer"))
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == FAIL
    # The weights stayed in 16 bits: the 4-bit model takes as much memory as the reference.
    assert check.evidence["footprint_ratio"] > 0.9
    assert "the weights were not quantized" in check.reason


@pytest.mark.slow
def test_model_check_fails_with_a_wrong_dequantizer(planted):
    run = _run(SYNTHETIC_CPU, planted("wrong_nf4_dequantizer"))
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == FAIL
    assert check.evidence["logits_cosine"] < model_bounds.COSINE_LOW
    assert "the 4-bit kernels are wrong" in check.reason
    # The storage is right: only the decoding is wrong, and the footprint cannot tell.
    low, high = check.evidence["expected_ratio_band"]
    assert low <= check.evidence["footprint_ratio"] <= high


@pytest.mark.slow
def test_the_dequantizing_path_itself_passes_with_the_real_dequantizer(planted):
    """The control for the test above: the same stand-in, the same dequantizing path, bitsandbytes' real kernel."""
    run = _run(SYNTHETIC_CPU, planted("wrong_nf4_dequantizer", STANDIN_DEQUANTIZER="real"))
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == PASS, check.reason


GENERATION_FAULTS = [
    pytest.param("broken_4bit_matmul", {"STANDIN_FAULT": "rows-1"}, id="fused path broken for M=1 only"),
    pytest.param("broken_4bit_matmul", {"STANDIN_FAULT": "rows-8"}, id="fused path broken for M<=8"),
    pytest.param("broken_4bit_matmul", {"STANDIN_FAULT": "bfloat16"}, id="fused path broken for bf16 only"),
    pytest.param("decode_only_linear4bit", {}, id="Linear4bit subclass wrong for one token"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("standin", "environ"), GENERATION_FAULTS)
def test_model_check_fails_when_only_the_path_of_decoding_is_broken(planted, standin, environ):
    """The faults of issue 24: dequantize_4bit and every many-token matmul right, the one-token steps wrong. The
    prompt's logits — what the check compared before — cannot tell; one-token decoding against a forward pass
    can."""
    run = _run(SYNTHETIC_CPU, planted(standin, **environ))
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == FAIL, check.reason
    healthy = _run(SYNTHETIC_CPU).data["devices"][0]
    assert check.evidence["logits_cosine"] == healthy["logits_cosine"]  # the prompt's logits: unchanged
    assert check.evidence["incremental_decode_error"] > 10 * model_bounds.decode_error_bound("bfloat16", True)
    assert "one-token decoding through the KV cache differs from a forward pass of the same 4-bit model" in (
        check.reason
    )


@pytest.mark.slow
def test_the_planted_kernel_with_nothing_broken_passes_the_model_check(planted):
    """The control for the test above: the same planted gemm_4bit kernel, computing right."""
    run = _run(SYNTHETIC_CPU, planted("broken_4bit_matmul", STANDIN_FAULT="none"))
    check = _only(judge_model(run, SYNTHETIC_CPU), "model.cpu")
    assert check.status == PASS, check.reason
    assert (
        check.evidence["incremental_decode_error"] == _run(SYNTHETIC_CPU).data["devices"][0]["incremental_decode_error"]
    )


@pytest.mark.slow
def test_the_probe_stops_at_its_time_limit_reports_and_removes_its_directory():
    run = run_script(
        _python(), probe_source(), [*probe_arguments("cpu"), "--time-limit", "1"], env=_env(), account=OWNER
    )
    assert run.data is not None, run.error
    # Where the alarm strikes (an import, a load) is up to the machine; the report names it as the cause either way.
    assert run.data["errors"]["probe"].startswith("TimeLimitReached: the probe's time limit of 1 s ran out")
    assert run.data["workdir"].startswith(tempfile.gettempdir() + "/rocm-fleet-model-")
    assert not Path(run.data["workdir"]).exists()
    checks = judge_model(run, SYNTHETIC_CPU)
    assert [c.status for c in checks] == [FAIL]
    assert "the probe's time limit of 1 s ran out" in checks[0].reason


# --- a real checkpoint directory on the host ------------------------------------------------------------------------

SAVE_CHECKPOINT = r"""
import sys, torch, transformers
torch.manual_seed(7)
config = transformers.LlamaConfig(
    vocab_size=2048, hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, tie_word_embeddings=False,
)
model = transformers.LlamaForCausalLM(config).to(torch.float16)
if sys.argv[2] == "safetensors":
    model.save_pretrained(sys.argv[1])
else:  # a pickle checkpoint: config.json and pytorch_model.bin only
    config.save_pretrained(sys.argv[1])
    torch.save(model.state_dict(), sys.argv[1] + "/pytorch_model.bin")
"""


@pytest.fixture(scope="module")
def checkpoints():
    """Small real checkpoints (a grouped-query-attention Llama in fp16), saved by root: in safetensors (made readable
    by the venv's owner, as a lab shares its model directory), the same left as saved (safetensors writes 0600), and
    as a pickle. Removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="model-check-"))
    try:
        parent.chmod(0o755)  # mkdtemp's 0700 would keep nobody out
        made = {}
        for name, kind in (("safetensors", "safetensors"), ("private", "safetensors"), ("pickle", "pickle")):
            made[name] = parent / name
            subprocess.run(
                [str(_python()), "-c", SAVE_CHECKPOINT, str(made[name]), kind],
                check=True,
                capture_output=True,
                env=_env(OMP_NUM_THREADS="1"),
            )
            if name != "private":
                for path in made[name].iterdir():
                    path.chmod(0o644)
        yield made
    finally:
        shutil.rmtree(parent)


@pytest.mark.slow
def test_checkpoint_path_loads_in_4bit_and_reports_its_footprint_against_the_typical_range(checkpoints):
    want = ModelExpectations(str(checkpoints["safetensors"]), "cpu")
    run = _run(want)
    check = _only(judge_model(run, want), "model.cpu")
    assert check.status == PASS, check.reason
    evidence = check.evidence
    assert evidence["model"]["source"] == "path" and evidence["model"]["model_type"] == "llama"
    assert evidence["model"]["parameters"] == evidence["quantized_weights"] + evidence["other_parameters"]
    low, high = evidence["expected_ratio_band"]
    assert low <= evidence["footprint_ratio"] <= high
    # A toy model's embeddings are a large share: its ratio is above the typical 7B-13B range, and it says so.
    assert evidence["within_typical_ratio"] is False and "typical 0.27-0.33" in check.reason
    assert evidence["fit"] is None  # no GPU memory to fit into on the CPU
    assert check.reason.startswith(f"{checkpoints['safetensors']} (llama) in 4-bit on cpu: footprint ")


@pytest.mark.slow
def test_a_pickle_checkpoint_is_not_loaded(checkpoints):
    want = ModelExpectations(str(checkpoints["pickle"]), "cpu")
    check = _only(judge_model(_run(want), want), "model")
    assert check.status == FAIL
    assert (
        "has no .safetensors weights: a pickle checkpoint (pytorch_model.bin) is code and is not loaded" in check.reason
    )


@pytest.mark.slow
def test_a_checkpoint_the_venv_owner_cannot_read_is_named_with_the_fix(checkpoints):
    want = ModelExpectations(str(checkpoints["private"]), "cpu")
    check = _only(judge_model(_run(want), want), "model")
    assert check.status == FAIL
    assert check.reason == (
        f"model check not run: probe: PermissionError: {checkpoints['private']}: model.safetensors "
        "not readable by nobody — make the checkpoint readable by the venv's owner"
    )


# --- the GPU path, through a mocked device boundary ---------------------------------------------------------------

MOCKED_GPU_DRIVER = r"""
import sys
probe = {"__name__": "model_probe"}
exec(compile(sys.stdin.read(), "model_probe.py", "exec"), probe)


class MockedGpu(probe["Device"]):
    # MOCK: a GPU's boundary (what torch.cuda would say) while every tensor stays on the CPU.
    gpu = True

    def __init__(self, total):
        super().__init__("cuda:0")
        self.total = total
        self.resets = 0

    def placement(self):
        return "cpu"

    def describe(self):
        return {"device": self.name, "gpu": True, "name": "stand-in RX 7900 XT (no GPU here)", "arch": "gfx1100",
                "total_memory": self.total}

    def reset_peak(self):
        self.resets += 1

    def peak_bytes(self):
        return 100 * 2**20 + self.resets


total = int(sys.argv[1])
sys.exit(probe["main"](sys.argv[2:], device_factory=lambda torch, mode, gpus: [MockedGpu(total)]))
"""


def _mocked_gpu_run(total_memory: int, want: ModelExpectations) -> ProbeRun:
    done = subprocess.run(
        [str(_python()), "-B", "-c", MOCKED_GPU_DRIVER, str(total_memory), *probe_arguments("auto", want.source)],
        input=probe_source(),
        capture_output=True,
        text=True,
        env=_env(OMP_NUM_THREADS="1"),
        cwd="/",
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    return ProbeRun(json.loads(lines[-1]), done.returncode)


@pytest.mark.slow
def test_synthetic_model_on_a_gpu_through_a_mocked_gpu_boundary():
    """MOCKED GPU: the probe's GPU branch (float16 for both models, peak memory of each) and the judge's GPU verdict."""
    want = ModelExpectations("synthetic", "auto")
    check = _only(judge_model(_mocked_gpu_run(20 * 2**30, want), want), "model.cuda0")
    assert check.status == PASS, check.reason
    assert check.evidence["gpu_pass"] is True and check.evidence["dtype"] == "float16"
    # The 4-bit model is measured first (the reference is then teacher-forced on its generated tokens).
    assert check.evidence["peak_memory_4bit"] == 100 * 2**20 + 1
    assert check.evidence["peak_memory_reference"] == 100 * 2**20 + 2
    assert check.reason.startswith("synthetic Llama 4x512 in 4-bit on cuda:0 (gfx1100): footprint 0.304 of fp16")
    assert "peak 100.0 MiB" in check.reason and "not a GPU pass" not in check.reason
    assert model_bounds.COSINE_LOW < check.evidence["logits_cosine"] < model_bounds.COSINE_HIGH


@pytest.mark.slow
def test_checkpoint_too_big_for_fp16_on_a_gpu_through_a_mocked_gpu_boundary(checkpoints):
    """MOCKED GPU with 4 MiB: the fp16 reference (5.0 MiB) cannot fit, so it is not loaded; the 4-bit model runs, the
    check says it fits in 4-bit (measured) and not in fp16, and warns that the logits were not compared."""
    want = ModelExpectations(str(checkpoints["safetensors"]), "auto")
    check = _only(judge_model(_mocked_gpu_run(4 * 2**20, want), want), "model.cuda0")
    assert check.status == WARN, check.reason
    evidence = check.evidence
    assert evidence["reference_skipped"] == "5.0 MiB of 16-bit weights cannot fit 4.0 MiB"
    assert "footprint_reference" not in evidence and evidence["footprint_16bit_measured"] is False
    assert evidence["fit"]["fits_4bit"] is True and evidence["fit"]["measured_4bit"] is True
    assert evidence["fit"]["fits_16bit"] is False
    assert "logits not compared (fp16 reference: 5.0 MiB of 16-bit weights cannot fit 4.0 MiB)" in check.reason
    assert "fits in 4-bit" in check.reason and "does not fit in fp16 (5.0 MiB)" in check.reason


# --- never as root ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is the verifier's, running as root")
@pytest.mark.parametrize("account", [None, ProbeAccount.of(pwd.getpwnam("root"))], ids=["own account", "root"])
def test_the_venv_python_is_never_run_as_root(account, tmp_path):
    marker = tmp_path / "ran"
    fake_python = tmp_path / "python"
    fake_python.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake_python.chmod(0o755)
    run = run_model_probe(fake_python, SYNTHETIC_CPU, account=account)
    assert run.data is None and not marker.exists()
    assert run.error == (
        "refused: the venv's owner is root, and the model check runs Transformers, which reads model "
        "files, only as an unprivileged account — set venv_owner to the account that owns the venv "
        "(by hand: --probe-user), or verify_model: 'off'"
    )
    check = _only(judge_model(run, SYNTHETIC_CPU), "model")
    assert check.status == FAIL and check.reason == f"model probe failed: {run.error}"


# --- in `verify check`: after NF4, where it passed, as the probe's account ----------------------------------------


@pytest.mark.slow
def test_verify_check_runs_the_model_check_after_nf4_on_the_cpu_as_the_owner_and_says_it_is_not_a_gpu_pass():
    """The real verifier (`verify check --device cpu --model synthetic --probe-user nobody`) on the real venv: the
    model check comes after NF4 passed on the CPU, runs as nobody, and the report (schema 3) carries it."""
    report, done = run_check(
        transformers_venv(),
        "--device",
        "cpu",
        "--model",
        "synthetic",
        "--probe-user",
        "nobody",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert report is not None, done.stderr
    jsonschema.validate(report, load_schema())
    ids = [c["id"] for c in report["checks"]]
    assert ids.index("model.cpu") == ids.index("nf4.cpu") + 1
    check = check_by_id(report, "model.cpu")
    assert check["status"] == PASS and check["reason"].endswith("— CPU run, not a GPU pass"), check["reason"]
    assert check["evidence"]["ran_as_uid"] == 65534  # nobody, as --probe-user said
    assert report["request"]["model"] == "synthetic"
    (run,) = report["facts"]["model"]
    assert run["device"] == "cpu" and run["gpu_pass"] is False and run["status"] == PASS
    assert model_bounds.COSINE_LOW < run["logits_cosine"] < model_bounds.COSINE_HIGH
    assert judge_report(report, exit_status=done.returncode).trustworthy


@pytest.mark.slow
def test_verify_check_fails_a_venv_whose_decoding_kernel_is_broken():
    """The whole verification, as issue 24 tried it (torch 2.13.0 CPU, bitsandbytes 0.50.1, Transformers, probe as
    nobody), with a fault that corrupts only the small-M 4-bit matmuls: NF4 fails and names the broken path, so the
    model check does not run on that device. (The verdict fails here anyway: a CPU venv is no ROCm stack.)"""
    with tempfile.TemporaryDirectory(prefix="model-planted-") as parent:
        os.chmod(parent, 0o755)
        standin = STANDINS / "broken_4bit_matmul" / "sitecustomize.py"
        python = planted_venv(Path(parent) / "venv", standin, {"STANDIN_FAULT": "rows-8", "OMP_NUM_THREADS": "1"})
        report, done = run_check(
            python.parent.parent, "--device", "cpu", "--model", "synthetic", "--probe-user", "nobody"
        )
    assert report is not None, done.stderr
    nf4_check = check_by_id(report, "nf4.cpu")
    assert nf4_check["status"] == FAIL and "(M 1–8, K 256, a CPU gemm_4bit kernel)" in nf4_check["reason"]
    assert check_by_id(report, "model.cpu")["status"] == SKIP
    assert judge_report(report, exit_status=done.returncode).trustworthy


def _host(probe_user: str, nf4_results: list[CheckResult], **options) -> Host:
    """A Host of the real venv whose NF4 outcome is given (the runtime probe itself is tested in test_runtime.py)."""
    host = Host(
        CheckOptions(
            venv=transformers_venv(),
            expect_rocm="7.2.4",
            expect_bitsandbytes="0.50.1",
            probe_user=probe_user,
            **options,
        )
    )
    host._shared[nf4._results] = nf4_results
    return host


def _nf4(device: str, status: str) -> CheckResult:
    return CheckResult(f"nf4.{device.replace(':', '')}", "NF4", status, "…", {"device": device})


def test_only_the_gpus_nf4_passed_on_are_asked_through_a_mocked_gpu_boundary(monkeypatch):
    """MOCKED GPU: NF4 passed on cuda:0 and cuda:2, failed on cuda:1 — the probe is asked for GPUs 0 and 2 only
    (its run is replaced: no GPU here), and cuda:1 gets a skipped model check saying why."""
    asked = []

    def probe_without_a_gpu(python, want, *, account, env, timeout):
        asked.append((want, account.user, timeout))
        return ProbeRun(None, -1, (), "no GPU here")

    monkeypatch.setattr(model, "run_model_probe", probe_without_a_gpu)
    host = _host(
        "nobody",
        [_nf4("cuda:0", PASS), _nf4("cuda:1", FAIL), _nf4("cuda:2", PASS)],
        model="synthetic",
        model_timeout=120.0,
    )
    results = model.run(host)
    assert asked == [(ModelExpectations("synthetic", "auto", (0, 2)), "nobody", 120.0)]
    assert probe_arguments("auto", "synthetic", (0, 2))[:4] == ["--device", "auto", "--gpu=0", "--gpu=2"]
    assert [(r.id, r.status) for r in results] == [("model", FAIL), ("model.cuda1", SKIP)]
    assert results[1].reason == "not run on cuda:1: its NF4 smoke did not pass"
    assert model.run(_host("nobody", [_nf4("cuda:0", PASS)], model="off")) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is the verifier's, running as root")
def test_a_venv_owner_that_is_root_is_refused_with_one_line_and_the_fix(monkeypatch):
    monkeypatch.setattr(model, "run_script", lambda *args, **kwargs: pytest.fail("the venv's python was started"))
    (check,) = model.run(_host("root", [_nf4("cpu", PASS)], model="synthetic"))
    assert (check.id, check.status) == ("model", WARN)
    assert check.reason == (
        "model check refused: the venv's owner is root, and the model check runs Transformers, "
        "which reads model files, only as an unprivileged account — set venv_owner to the account "
        "that owns the venv (by hand: --probe-user), or verify_model: 'off'"
    )
