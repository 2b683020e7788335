"""Checks 3 and 4 — run the probe in the venv, then judge what it saw (torch, GPUs, bitsandbytes' library, NF4).

`run_probe` is the one place in `verify/` that starts a process: the venv's own python, fed `runtime_probe.py` on
stdin (so the probed process imports nothing of ours). Everything after that is pure: `judge_runtime` turns the
probe's JSON into `CheckResult`s. The comparison of /proc/self/maps with the static prediction is in
`maps_compare.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from verify import nf4_bounds
from verify.gpu_arch import BNB_ROCM72_ARCHS, arch_supported, base_arch
from verify.installed import INSTALL_ROCM_FIX
from verify.report import FAIL, PASS, WARN, CheckResult
from verify.rocm_libraries import is_rocm_library

NATIVE_CLASS = "CudaBNBNativeLibrary"  # bitsandbytes' class for a loaded CUDA/ROCm library
MOCK_CLASS = "ErrorHandlerMockBNBNativeLibrary"  # what it installs when loading failed
DEFAULT_TIMEOUT_S = 900


@dataclass(frozen=True)
class ProbeRun:
    """What came back from the probe process: its JSON (None if it produced none), exit status, stderr's tail."""

    data: Mapping[str, Any] | None
    returncode: int
    stderr_tail: tuple[str, ...] = ()
    error: str | None = None  # why there is no data, one line

    def to_evidence(self) -> dict[str, Any]:
        return {"returncode": self.returncode, "stderr_tail": list(self.stderr_tail), "error": self.error}


@dataclass(frozen=True)
class RuntimeExpectations:
    release: str  # "7.2.4"
    device: str  # "auto" | "cpu"
    gpu_required: bool = True
    expected_bnb_library: str = "libbitsandbytes_rocm72.so"

    @property
    def major_minor(self) -> str:
        return ".".join(self.release.split(".")[:2])


def probe_source() -> str:
    return resources.files(__package__).joinpath("runtime_probe.py").read_text(encoding="utf-8")


def run_probe(
    python: Path,
    device: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ProbeRun:
    """Run the probe with `python` (the venv's interpreter) and the caller's environment (HIP_VISIBLE_DEVICES …)."""
    arguments = [
        "--device", device,
        "--size", str(nf4_bounds.SHAPE[0]), "--blocksize", str(nf4_bounds.BLOCKSIZE), "--seed", str(nf4_bounds.SEED),
    ]
    return run_script(python, probe_source(), arguments, env=env, timeout=timeout)


def run_script(
    python: Path,
    source: str,
    arguments: list[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    run_as: Mapping[str, Any] | None = None,
) -> ProbeRun:
    """Run a self-contained probe script, fed on stdin to `python`, and read the JSON line it prints.

    -B: write no .pyc into the venv — verification changes nothing on the host. `run_as`: extra subprocess arguments
    that drop privileges in the child (user, group, extra_groups — see verify/run_as.py).
    """
    command = [str(python), "-B", "-", *arguments]
    try:
        done = subprocess.run(
            command,
            input=source,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ if env is None else env),
            cwd="/",
            **(run_as or {}),
        )
    except subprocess.TimeoutExpired as expired:
        tail = (expired.stderr or b"")[-2000:]
        tail_text = tail.decode("utf-8", "replace") if isinstance(tail, bytes) else tail
        return ProbeRun(None, -1, tuple(tail_text.splitlines()[-10:]), f"the probe did not finish within {timeout:.0f} s")
    except OSError as error:
        return ProbeRun(None, -1, (), f"cannot run {python}: {error.strerror}")
    stderr_tail = tuple(line for line in done.stderr.splitlines() if line.strip())[-10:]
    data = None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                pass
            break
    if data is None:
        why = f"exit status {done.returncode}" if done.returncode >= 0 else f"killed by signal {-done.returncode}"
        last = stderr_tail[-1] if stderr_tail else "no output"
        return ProbeRun(None, done.returncode, stderr_tail, f"the probe produced no report ({why}; last line: {last})")
    return ProbeRun(data, done.returncode, stderr_tail)


# --- judging ----------------------------------------------------------------------------------------------------


def _missing_library(load_error: str | None) -> str | None:
    """'libhipblas.so.3: cannot open shared object file: …' → 'libhipblas.so.3'."""
    if load_error and "cannot open shared object file" in load_error:
        return load_error.split(":", 1)[0].strip()
    return None


def check_torch_runtime(probe: Mapping[str, Any], want: RuntimeExpectations) -> CheckResult:
    title = f"torch imports and reports HIP {want.major_minor}"
    errors = probe.get("errors", {})
    torch = probe.get("torch")
    if torch is None or "import torch" in errors:
        reason = errors.get("import torch", "torch was not imported")
        return CheckResult("runtime.torch", title, FAIL, f"import torch failed: {reason}", {"errors": errors})
    evidence = {k: torch.get(k) for k in ("version", "hip", "cuda", "cuda_available", "file")}
    hip = torch.get("hip")
    if not hip:
        return CheckResult(
            "runtime.torch", title, FAIL,
            f"torch {torch.get('version')} reports no HIP (torch.version.hip is None): not a ROCm build", evidence,
        )
    if not (hip == want.major_minor or hip.startswith(want.major_minor + ".")):
        return CheckResult(
            "runtime.torch", title, FAIL,
            f"torch {torch.get('version')} reports HIP {hip}, not {want.major_minor} — install the rocm{want.major_minor} wheel",
            evidence,
        )
    return CheckResult(
        "runtime.torch", title, PASS,
        f"torch {torch.get('version')}, HIP {hip}, torch.cuda.is_available() {torch.get('cuda_available')}", evidence,
    )


def check_devices(probe: Mapping[str, Any], want: RuntimeExpectations) -> CheckResult:
    title = "GPUs visible to torch"
    torch = probe.get("torch") or {}
    devices = torch.get("devices") or []
    env = probe.get("env", {})
    evidence = {
        "devices": [dict(d, supported=arch_supported(d.get("arch"))) for d in devices],
        "visibility_env": {k: v for k, v in env.items() if k.endswith("VISIBLE_DEVICES") or k == "GPU_DEVICE_ORDINAL"},
        "bnb_rocm72_archs": sorted(BNB_ROCM72_ARCHS),
        "device_mode": want.device,
        "gpu_required": want.gpu_required,
    }
    listing = ", ".join(f"{d['index']}: {base_arch(d.get('arch')) or '?'} ({d.get('name')})" for d in devices)
    if want.device == "cpu":
        seen = f" ({len(devices)} visible, not tested: {listing})" if devices else ""
        return CheckResult(
            "runtime.devices", title, WARN,
            f"--device cpu: NF4 ran on the CPU, no GPU was exercised — this is not a GPU pass{seen}", evidence,
        )
    if not devices:
        visibility = ", ".join(f"{k}={v!r}" for k, v in evidence["visibility_env"].items()) or "no *_VISIBLE_DEVICES set"
        if want.gpu_required:
            return CheckResult(
                "runtime.devices", title, FAIL,
                f"no GPU visible to torch (torch.cuda.is_available() is {torch.get('cuda_available')}; {visibility}) — "
                "check /dev/kfd and /dev/dri, the user's render and video groups, and HIP_VISIBLE_DEVICES",
                evidence,
            )
        return CheckResult(
            "runtime.devices", title, WARN,
            f"no GPU on this host and none required: NF4 ran on the CPU — not a GPU pass ({visibility})", evidence,
        )
    unsupported = [d for d in devices if not arch_supported(d.get("arch"))]
    if unsupported:
        names = ", ".join(f"GPU {d['index']} is {base_arch(d.get('arch')) or 'unknown'}" for d in unsupported)
        return CheckResult(
            "runtime.devices", title, WARN,
            f"{names}: bitsandbytes' ROCm {want.major_minor} build has no kernels for it "
            "(expect 'HIP error: invalid device function')",
            evidence,
        )
    return CheckResult("runtime.devices", title, PASS, f"{len(devices)} GPU(s): {listing}", evidence)


def check_bnb_library(probe: Mapping[str, Any], want: RuntimeExpectations) -> CheckResult:
    title = "bitsandbytes' native ROCm library really loaded"
    bnb = probe.get("bitsandbytes") or {}
    errors = probe.get("errors", {})
    evidence = {
        k: bnb.get(k) for k in ("version", "backend", "library_class", "library_file", "load_error", "rocm_gpu_arch", "log")
    }
    evidence["expected_library"] = want.expected_bnb_library
    cls = bnb.get("library_class")
    if cls is None:
        reason = errors.get("import bitsandbytes", "bitsandbytes was not imported")
        return CheckResult("runtime.bnb_library", title, FAIL, f"import bitsandbytes failed: {reason}", evidence)
    if cls == MOCK_CLASS:
        load_error = (bnb.get("load_error") or "unknown error").strip()
        missing = _missing_library(load_error)
        if missing and is_rocm_library(missing):
            fix = INSTALL_ROCM_FIX.format(release=want.release)
        elif missing:
            fix = f"install the package that provides {missing}"
        else:
            fix = "see the load error; `python -m bitsandbytes` in the venv shows more"
        return CheckResult(
            "runtime.bnb_library", title, FAIL,
            f"bitsandbytes fell back to its mock library ({cls}): {load_error.splitlines()[0]} — {fix}", evidence,
        )
    loaded = Path(bnb.get("library_file") or "?").name
    devices = (probe.get("torch") or {}).get("devices") or []
    if cls == NATIVE_CLASS and loaded == want.expected_bnb_library:
        return CheckResult("runtime.bnb_library", title, PASS, f"{cls} from {bnb.get('library_file')}", evidence)
    if cls == NATIVE_CLASS:
        return CheckResult(
            "runtime.bnb_library", title, FAIL,
            f"bitsandbytes loaded {loaded}, not {want.expected_bnb_library} — "
            "unset BNB_ROCM_VERSION or install the matching torch/ROCm",
            evidence,
        )
    if not devices:
        # bitsandbytes only tries its GPU library when torch sees a GPU: without one it loads the CPU library.
        return CheckResult(
            "runtime.bnb_library", title, WARN if (want.device == "cpu" or not want.gpu_required) else FAIL,
            f"bitsandbytes loaded its CPU library {loaded} because torch sees no GPU: "
            f"{want.expected_bnb_library} was not loaded in this process (the static check covers its linkage)",
            evidence,
        )
    return CheckResult(
        "runtime.bnb_library", title, FAIL,
        f"bitsandbytes loaded {loaded} ({cls}) although torch sees {len(devices)} GPU(s)", evidence,
    )


def check_nf4(probe: Mapping[str, Any], want: RuntimeExpectations) -> list[CheckResult]:
    runs = probe.get("nf4") or []
    if not runs:
        errors = probe.get("errors", {})
        why = "; ".join(f"{k}: {v}" for k, v in errors.items() if "traceback" not in k) or "nothing to run it with"
        return [CheckResult("nf4", "NF4 smoke test", FAIL, f"NF4 smoke not run: {why}", {"errors": errors})]
    devices = {f"cuda:{d['index']}": d for d in ((probe.get("torch") or {}).get("devices") or [])}
    results = []
    for run in runs:
        device = run.get("device", "?")
        ok, problems = nf4_bounds.judge_nf4(run)
        on_cpu = device == "cpu"
        arch = base_arch(devices.get(device, {}).get("arch")) if not on_cpu else None
        label = f"{device} ({arch})" if arch else device
        evidence = dict(run)
        evidence["bounds"] = nf4_bounds.bounds_evidence()
        evidence["gpu_pass"] = not on_cpu
        check_id = f"nf4.{device.replace(':', '')}"
        title = f"NF4 smoke on {label}"
        if not ok:
            results.append(CheckResult(check_id, title, FAIL, f"NF4 on {label}: {'; '.join(problems)}", evidence))
            continue
        total_ms = sum((run.get("timings_ms") or {}).values())
        memory = run.get("gpu_peak_memory_bytes")
        memory_text = f", {memory / 2**20:.1f} MiB GPU memory" if memory is not None else ""
        cpu_note = " — CPU run, not a GPU pass" if on_cpu else ""
        results.append(
            CheckResult(
                check_id, title, PASS,
                f"NF4 on {label}: round-trip |err| {run['roundtrip_mean_abs_error']:.4f}, "
                f"matmul_4bit |err| {run['matmul_mean_abs_error']:.4f}, Linear4bit cosine {run['linear4bit_cosine']:.4f}, "
                f"{total_ms:.0f} ms{memory_text}{cpu_note}",
                evidence,
            )
        )
    return results


def judge_runtime(probe_run: ProbeRun, want: RuntimeExpectations) -> list[CheckResult]:
    """Checks 3 and 4 (without the maps comparison) from one probe run."""
    if probe_run.data is None:
        return [
            CheckResult(
                "runtime.torch", "the runtime probe ran in the venv", FAIL,
                f"runtime probe failed: {probe_run.error}", probe_run.to_evidence(),
            )
        ]
    probe = probe_run.data
    return [
        check_torch_runtime(probe, want),
        check_devices(probe, want),
        check_bnb_library(probe, want),
        *check_nf4(probe, want),
    ]
