"""The model check — a 4-bit NF4 causal LM loads and generates on every GPU: run `model_probe.py` in the venv as the
venv's owner, then judge what it measured (`model.<device>`, e.g. `model.cuda0`, `model.cpu`).

`run` comes after NF4 (verify check) and asks only the devices NF4 passed on; a device NF4 failed on gets a skipped
`model.<device>`. `run_model_probe` starts the venv's python the way `runtime.run_probe` does — `runtime.run_script`,
as the account probe_account.py chose (the venv's owner: `--probe-user`, venv_owner), fed the probe on stdin, one
JSON line back, within `--model-timeout` — but never as root, whatever the venv: Transformers reads model files (a
checkpoint directory is the lab's, not root's), so an owner that is root is refused (`root_refusal`; the check then
warns with the fix). Everything after that is pure: `judge_model` turns the probe's JSON into `CheckResult`s with the
bounds of `model_bounds.py`: pass; warn when a checkpoint's 16-bit reference could not be loaded on a GPU (its
logits were not compared); fail otherwise. A CPU run says plainly that it is not a GPU pass. For a checkpoint, each
GPU's check also says whether the model fits it in 4-bit and in 16 bits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from verify.checks import model_bounds, nf4
from verify.checks.host import Host
from verify.checks.probe_account import ProbeAccount
from verify.checks.runtime import ProbeRun, run_script
from verify.report.report import FAIL, PASS, SKIP, WARN, CheckResult, ModelRun
from verify.stack.gpu_arch import base_arch

# Synthetic: seconds on a GPU, about half a minute on a busy shared CPU; a 13B checkpoint: reading 26 GB, quantizing.
DEFAULT_TIMEOUT_S = 600
# The probe stops itself at this share of the timeout, so that it still reports what it measured and removes its
# temporary directory; the subprocess timeout (a kill) is only the backstop.
TIME_LIMIT_SHARE = 0.9
SYNTHETIC = "synthetic"
OFF = "off"
GIB = 2**30


@dataclass(frozen=True)
class ModelExpectations:
    source: str  # "synthetic", or the absolute path of a checkpoint directory on the host
    device: str = "auto"  # "auto" | "cpu"
    gpus: tuple[int, ...] = ()  # with "auto": only these GPU indexes (those NF4 passed on); empty: every GPU

    @property
    def synthetic(self) -> bool:
        return self.source == SYNTHETIC


def probe_source() -> str:
    return resources.files(__package__).joinpath("model_probe.py").read_text(encoding="utf-8")


def probe_arguments(device: str, source: str = SYNTHETIC, gpus: tuple[int, ...] = ()) -> list[str]:
    selected = [f"--gpu={index}" for index in gpus]
    if source == SYNTHETIC:
        return ["--device", device, *selected, *model_bounds.SYNTHETIC_ARGUMENTS]
    return [
        "--device",
        device,
        *selected,
        "--path",
        source,
        "--seed",
        str(model_bounds.SEED),
        *model_bounds.PROMPT_ARGUMENTS,
    ]


def root_refusal(account: ProbeAccount | None) -> str | None:
    """Why the model probe must not run as `account` (None: this process's own account): it is root."""
    if (os.geteuid() if account is None else account.uid) != 0:
        return None
    return (
        "refused: the venv's owner is root, and the model check runs Transformers, which reads model files, only "
        "as an unprivileged account — set venv_owner to the account that owns the venv (by hand: --probe-user), "
        "or verify_model: 'off'"
    )


def run_model_probe(
    python: Path,
    want: ModelExpectations,
    *,
    account: ProbeAccount | None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ProbeRun:
    """Run the model probe with the venv's `python` as `account` (the venv's owner; None: this process's own account)
    with the caller's environment as probe_account.py passes it (HIP_VISIBLE_DEVICES …). Never as root."""
    refusal = root_refusal(account)
    if refusal is not None:
        return ProbeRun(None, -1, (), refusal)
    arguments = [
        *probe_arguments(want.device, want.source, want.gpus),
        "--time-limit",
        f"{timeout * TIME_LIMIT_SHARE:g}",
    ]
    return run_script(python, probe_source(), arguments, env=env, timeout=timeout, account=account)


# --- judging ----------------------------------------------------------------------------------------------------


def _mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB" if value < GIB else f"{value / GIB:.1f} GiB"


def _fit_evidence(device: Mapping[str, Any]) -> dict[str, Any] | None:
    total = device.get("total_memory")
    needed = model_bounds.weight_bytes(device)
    if not total or needed is None:
        return None
    peak = device.get("peak_memory_4bit")
    return {
        "total_memory": total,
        "weights_4bit": needed["4bit"],
        "weights_16bit": needed["16bit"],
        # Measured beats estimated: when the 4-bit model generated on this GPU, it fits.
        "fits_4bit": bool(peak) or model_bounds.fits(needed["4bit"], total),
        "fits_16bit": model_bounds.fits(needed["16bit"], total),
        "measured_4bit": bool(peak),
    }


def _fit_text(fit: Mapping[str, Any], dtype16: str) -> str:
    total = _mib(fit["total_memory"])
    four = (
        f"fits in 4-bit ({_mib(fit['weights_4bit'])} of {total})"
        if fit["fits_4bit"]
        else (f"does not fit in 4-bit ({_mib(fit['weights_4bit'])} of {total})")
    )
    sixteen = "fits" if fit["fits_16bit"] else "does not fit"
    return f"{four}, {sixteen} in {dtype16} ({_mib(fit['weights_16bit'])})"


def _model_label(probe: Mapping[str, Any]) -> str:
    model = probe.get("model") or {}
    if model.get("source") == "synthetic":
        config = model.get("config") or {}
        return f"synthetic Llama {config.get('num_hidden_layers')}x{config.get('hidden_size')}"
    return f"{model.get('path')} ({model.get('model_type') or '?'})"


def judge_device(probe: Mapping[str, Any], device: Mapping[str, Any], want: ModelExpectations) -> CheckResult:
    name = device.get("device", "?")
    on_gpu = bool(device.get("gpu"))
    arch = base_arch(device.get("arch")) if on_gpu else None
    label = f"{name} ({arch})" if arch else name
    check_id = _check_id(name)
    title = f"4-bit NF4 causal LM on {label}"
    ok, problems = model_bounds.judge_model_run(device, synthetic=want.synthetic)
    ratio = model_bounds.footprint_ratio(device)
    band = model_bounds.expected_ratio_band(device)
    sixteen, measured16 = model_bounds.footprint_16bit(device)
    dtype16 = "fp16" if device.get("dtype") == "float16" else (device.get("dtype") or "16-bit")
    fit = _fit_evidence(device) if not want.synthetic else None
    evidence = dict(device)
    evidence.update(
        model=probe.get("model"),
        versions=probe.get("versions"),
        ran_as_uid=probe.get("uid"),  # the probe's account (the venv's owner), never 0
        footprint_ratio=ratio,
        expected_ratio_band=list(band) if band else None,
        footprint_16bit_measured=measured16,
        fit=fit,
        bounds=model_bounds.bounds_evidence(want.synthetic),
        gpu_pass=on_gpu,
    )
    if not want.synthetic and ratio is not None:
        low, high = model_bounds.TYPICAL_RATIO
        evidence["within_typical_ratio"] = low <= ratio <= high
    model = _model_label(probe)
    if not ok:
        return CheckResult(check_id, title, FAIL, f"{model} in 4-bit on {label}: {'; '.join(problems)}", evidence)

    parts = [
        f"footprint {ratio:.3f} of {dtype16} ({_mib(device['footprint_4bit'])} of {_mib(sixteen)}"
        + ("" if measured16 else ", estimated")
        + ")"
    ]
    if not want.synthetic:
        low, high = model_bounds.TYPICAL_RATIO
        parts[-1] += f", typical {low}-{high}"
    status = PASS
    cosine = device.get("logits_cosine")
    if cosine is not None:
        parts.append(f"logits cosine {cosine:.3f}, top-1 {device.get('top1_agreement'):.2f}")
    else:
        status = WARN
        why = device.get("reference_skipped") or (device.get("errors") or {}).get("16-bit reference") or "no reference"
        parts.append(f"logits not compared ({dtype16} reference: {why})")
    generated = (device.get("generated") or [[]])[0]
    if device.get("incremental_decode_error") is not None:
        parts.append(
            f"one-token decoding = full forward within {device['incremental_decode_error']:.4f} "
            f"(bound {model_bounds.decode_error_bound(device.get('dtype'), want.synthetic):.4f})"
        )
    if device.get("continuation_top1") is not None and device.get("continuation_cosine") is not None:
        parts.append(
            f"continuation top-1 {device['continuation_top1']:.2f}, cosine {device['continuation_cosine']:.3f} "
            f"to the {dtype16} reference"
        )
    parts.append(f"{len(generated)} tokens twice identical, {device.get('tokens_per_s')} tokens/s")
    if device.get("peak_memory_4bit") is not None:
        parts.append(f"peak {_mib(device['peak_memory_4bit'])}")
    if fit is not None:
        parts.append(_fit_text(fit, dtype16))
    cpu_note = " — CPU run, not a GPU pass" if not on_gpu else ""
    return CheckResult(check_id, title, status, f"{model} in 4-bit on {label}: {', '.join(parts)}{cpu_note}", evidence)


def judge_model(probe_run: ProbeRun, want: ModelExpectations) -> list[CheckResult]:
    """One check per device from one probe run; one failing `model` check when there is nothing per device."""
    title = "4-bit NF4 causal LM loads and generates"
    if probe_run.data is None:
        return [CheckResult("model", title, FAIL, f"model probe failed: {probe_run.error}", probe_run.to_evidence())]
    probe = probe_run.data
    devices = probe.get("devices") or []
    errors = {k: v for k, v in (probe.get("errors") or {}).items() if "traceback" not in k}
    if not devices:
        why = "; ".join(f"{k}: {v}" for k, v in errors.items()) or "no device was measured"
        evidence = {"errors": probe.get("errors"), "versions": probe.get("versions"), "model": probe.get("model")}
        return [CheckResult("model", title, FAIL, f"model check not run: {why}", evidence)]
    if "probe" in errors:
        # The probe stopped part-way (its time limit): the device it was on, and those after it, say so.
        devices = [
            dict(d, errors={**(d.get("errors") or {}), "probe": errors["probe"]})
            if "generation_identical" not in d
            else d
            for d in devices
        ]
    return [judge_device(probe, device, want) for device in devices]


# --- this run's check ------------------------------------------------------------------------------------------------


def run(host: Host) -> list[CheckResult]:
    """After NF4, on the devices NF4 passed on (a device it failed on gets a skipped model.<device>); nothing with
    --model off or --static-only, nor when the probe did not run (runtime.torch says why)."""
    options = host.options
    if options.model == OFF or host.probe_account is None or host.runtime_blocked:
        return []
    passed = nf4.passed_devices(host)
    skipped = [
        CheckResult(
            _check_id(r.evidence["device"]),
            f"4-bit NF4 causal LM on {r.evidence['device']}",
            SKIP,
            f"not run on {r.evidence['device']}: its NF4 smoke did not pass",
            {"device": r.evidence["device"]},
        )
        for r in nf4.run(host)
        if r.status != PASS and r.evidence.get("device")
    ]
    if not passed:
        return skipped
    refusal = root_refusal(host.probe_account)
    if refusal is not None:
        # Not a failure of the GPU stack: a setting keeps the check from running, and the line says which.
        return [
            CheckResult(
                "model",
                "4-bit NF4 causal LM loads and generates",
                WARN,
                f"model check {refusal}",
                {"probe_account": host.probe_account.user},
            )
        ] + skipped
    on_cpu = "cpu" in passed
    want = ModelExpectations(
        options.model,
        "cpu" if on_cpu else "auto",
        () if on_cpu else tuple(int(d.split(":", 1)[1]) for d in passed if d.startswith("cuda:")),
    )
    found = run_model_probe(
        host.venv.python, want, account=host.probe_account, env=options.environ, timeout=options.model_timeout
    )
    return judge_model(found, want) + skipped


def _check_id(device: str) -> str:
    return f"model.{device.replace(':', '')}"


def facts(host: Host, results: list[CheckResult]) -> dict:
    runs = []
    for r in results:
        if not r.id.startswith("model.") or r.status == SKIP or not r.evidence:
            continue
        fit = r.evidence.get("fit") or {}
        runs.append(
            ModelRun(
                r.evidence.get("device"),
                r.status,
                r.evidence.get("footprint_ratio"),
                r.evidence.get("logits_cosine"),
                r.evidence.get("tokens_per_s"),
                bool(r.evidence.get("gpu_pass")),
                fit.get("fits_4bit"),
                fit.get("fits_16bit"),
            )
        )
    return {"model": tuple(runs)}
