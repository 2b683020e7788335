"""Check 3 — run the probe in the venv, then judge what it saw (torch, GPUs, bitsandbytes' library).

`run_script` is the one place in `verify/` that starts the venv's own python: fed a self-contained probe on stdin
(so the probed process imports nothing of ours) — `runtime_probe.py` here (`run_probe`), `model_probe.py` for the
model check (model.py). Everything after that is pure: `judge_runtime` turns the
probe's JSON into `CheckResult`s. The same probe run serves the comparison of /proc/self/maps with the static
prediction (`maps.py`) and the NF4 smoke (`nf4.py`).

The probe runs as the venv's owner, never as root for a venv another account can change (`probe_account.py`): the
account is chosen when the run starts (`Host.probe_account`) and each ProbeRun says who ran it.
"""

from __future__ import annotations

import json
import os
import posixpath
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from verify.checks import linkage
from verify.checks.host import Host
from verify.checks.probe_account import ProbeAccount, root_probe_refusal
from verify.checks.versions import INSTALL_ROCM_FIX
from verify.report.report import FAIL, PASS, WARN, CheckResult, Gpu
from verify.stack.gpu_arch import arch_supported, base_arch
from verify.stack.rocm_libraries import is_rocm_library
from verify.stack.rocm_release import RocmRelease
from verify.system.pci_ids import INTEGRATED_ARCHS

NATIVE_CLASS = "CudaBNBNativeLibrary"  # bitsandbytes' class for a loaded CUDA/ROCm library
MOCK_CLASS = "ErrorHandlerMockBNBNativeLibrary"  # what it installs when loading failed
DEFAULT_TIMEOUT_S = 900
# The NF4 measurement the probe makes (verify/checks/nf4.py judges it against bounds taken for exactly this).
BLOCKSIZE = 64
SHAPE = (1024, 1024)
SEED = 1234
PROBE_OUTPUT_LIMIT = 16 * 1024 * 1024  # the probe's report is well under 1 MiB (its maps lists are the bulk)


@dataclass(frozen=True)
class ProbeRun:
    """What came back from the probe process: its JSON (None if it produced none), exit status, stderr's tail."""

    data: Mapping[str, Any] | None
    returncode: int
    stderr_tail: tuple[str, ...] = ()
    error: str | None = None  # why there is no data, one line
    account: ProbeAccount | None = None  # who ran it; None: no process was started

    def to_evidence(self) -> dict[str, Any]:
        return {"returncode": self.returncode, "stderr_tail": list(self.stderr_tail), "error": self.error}


@dataclass(frozen=True)
class RuntimeExpectations:
    release: str  # "7.2.4"
    device: str  # "auto" | "cpu"
    gpu_required: bool
    expected_bnb_library: str  # "libbitsandbytes_rocm72.so"
    gpu_archs: frozenset[str]  # what the release's builds have kernels for

    @classmethod
    def of(cls, release: RocmRelease, device: str, gpu_required: bool = True) -> RuntimeExpectations:
        return cls(release.release, device, gpu_required, release.bitsandbytes_library, release.gpu_archs)

    @property
    def major_minor(self) -> str:
        return ".".join(self.release.split(".")[:2])


def probe_source() -> str:
    return resources.files(__package__).joinpath("runtime_probe.py").read_text(encoding="utf-8")


def probe_arguments(device: str) -> list[str]:
    """The probe's command line for `device` (also what bench/fleet_scale.py times on a host)."""
    return [
        "--device",
        device,
        "--size",
        str(SHAPE[0]),
        "--blocksize",
        str(BLOCKSIZE),
        "--seed",
        str(SEED),
        *(f"--integrated-arch={arch}" for arch in sorted(INTEGRATED_ARCHS)),
    ]


def run_probe(
    python: Path,
    device: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    account: ProbeAccount | None = None,
) -> ProbeRun:
    """Run the probe with `python` (the venv's interpreter) and the caller's environment (HIP_VISIBLE_DEVICES …), as
    `account` when that is not this process's own (then with that account's environment: probe_account.py)."""
    return run_script(python, probe_source(), probe_arguments(device), env=env, timeout=timeout, account=account)


def run_script(
    python: Path,
    source: str,
    arguments: list[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    account: ProbeAccount | None = None,
) -> ProbeRun:
    """Run a self-contained probe script (this one, the model check's), fed on stdin to `python`, as `account`, and
    read the JSON line it prints: the one way the verifier runs the venv's code.

    -B: write no .pyc into the venv — verification changes nothing on the host.
    """
    command = [str(python), "-B", "-", *arguments]
    environ = dict(os.environ if env is None else env)
    switch = {}
    if account is not None:
        switch, environ = account.switch(), account.environment(environ)
    # Its output goes to private unnamed files, of which only the tails are read: the probe is the owner's code, and
    # root's verifier must neither take in whatever it prints nor wait for a child it left holding a pipe. Its own
    # session, so that what it started is stopped with it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                env=environ,
                cwd="/",  # readable by every account
                start_new_session=True,
                **switch,
            )
        except OSError as error:
            return ProbeRun(None, -1, (), f"cannot run {python}: {error.strerror}")
        timed_out = False
        try:
            process.communicate(source.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _stop_session(process)
        stdout, stderr = _tail(out, PROBE_OUTPUT_LIMIT), _tail(err, 64 * 1024)
    stderr_tail = tuple(line for line in stderr.splitlines() if line.strip())[-10:]
    if timed_out:
        return ProbeRun(None, -1, stderr_tail, f"the probe did not finish within {timeout:.0f} s", account)
    data = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                pass
            break
    if not isinstance(data, dict):
        data = None
    if data is None:
        code = process.returncode
        why = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
        last = stderr_tail[-1] if stderr_tail else "no output"
        return ProbeRun(None, code, stderr_tail, f"the probe produced no report ({why}; last line: {last})", account)
    return ProbeRun(data, process.returncode, stderr_tail, account=account)


def _stop_session(process: subprocess.Popen) -> None:
    """Kill whatever is left of the probe's session (the probe itself after a timeout, anything it started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _tail(stream, limit: int) -> str:
    """The last `limit` bytes written to `stream`, as text."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - limit))
    return stream.read(limit).decode("utf-8", errors="replace")


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
            "runtime.torch",
            title,
            FAIL,
            f"torch {torch.get('version')} reports no HIP (torch.version.hip is None): not a ROCm build",
            evidence,
        )
    if not (hip == want.major_minor or hip.startswith(want.major_minor + ".")):
        return CheckResult(
            "runtime.torch",
            title,
            FAIL,
            f"torch {torch.get('version')} reports HIP {hip}, not {want.major_minor} — install the "
            f"rocm{want.major_minor} wheel",
            evidence,
        )
    return CheckResult(
        "runtime.torch",
        title,
        PASS,
        f"torch {torch.get('version')}, HIP {hip}, torch.cuda.is_available() {torch.get('cuda_available')}",
        evidence,
    )


def check_devices(probe: Mapping[str, Any], want: RuntimeExpectations) -> CheckResult:
    title = "GPUs visible to torch"
    torch = probe.get("torch") or {}
    devices = torch.get("devices") or []
    env = probe.get("env", {})
    evidence = {
        "devices": [dict(d, supported=arch_supported(d.get("arch"), want.gpu_archs)) for d in devices],
        "visibility_env": {k: v for k, v in env.items() if k.endswith("VISIBLE_DEVICES") or k == "GPU_DEVICE_ORDINAL"},
        "bnb_rocm72_archs": sorted(want.gpu_archs),  # the key predates release files
        "device_mode": want.device,
        "gpu_required": want.gpu_required,
    }
    listing = ", ".join(f"{d['index']}: {base_arch(d.get('arch')) or '?'} ({d.get('name')})" for d in devices)
    if want.device == "cpu":
        seen = f" ({len(devices)} visible, not tested: {listing})" if devices else ""
        return CheckResult(
            "runtime.devices",
            title,
            WARN,
            f"--device cpu: NF4 ran on the CPU, no GPU was exercised — this is not a GPU pass{seen}",
            evidence,
        )
    if not devices:
        visibility = (
            ", ".join(f"{k}={v!r}" for k, v in evidence["visibility_env"].items()) or "no *_VISIBLE_DEVICES set"
        )
        if want.gpu_required:
            return CheckResult(
                "runtime.devices",
                title,
                FAIL,
                f"no GPU visible to torch (torch.cuda.is_available() is {torch.get('cuda_available')}; "
                f"{visibility}) — check /dev/kfd and /dev/dri, the user's render and video groups, "
                "and HIP_VISIBLE_DEVICES",
                evidence,
            )
        return CheckResult(
            "runtime.devices",
            title,
            WARN,
            f"no GPU on this host and none required: NF4 ran on the CPU — not a GPU pass ({visibility})",
            evidence,
        )
    integrated = [d for d in devices if d.get("integrated")]
    work = [d for d in devices if d.get("work", True)]
    if integrated and len(work) < len(devices):
        igpus = ", ".join(f"GPU {d['index']} ({base_arch(d.get('arch')) or '?'}, {d.get('name')})" for d in integrated)
        dgpus = ", ".join(f"GPU {d['index']} ({base_arch(d.get('arch')) or '?'}, {d.get('name')})" for d in work)
        visible = ",".join(str(d["index"]) for d in work)
        return CheckResult(
            "runtime.devices",
            title,
            WARN,
            f"{igpus} is an APU's integrated GPU beside {dgpus}: NF4 ran on GPU {visible} only; the ROCm runtime may "
            f"crash with the integrated GPU enumerated, even with HIP_VISIBLE_DEVICES set (AMD's prerequisites) — "
            f"disable the integrated GPU in the BIOS, or at least set HIP_VISIBLE_DEVICES={visible} for the users",
            evidence,
        )
    unsupported = [d for d in devices if not arch_supported(d.get("arch"), want.gpu_archs)]
    if unsupported:
        names = ", ".join(f"GPU {d['index']} is {base_arch(d.get('arch')) or 'unknown'}" for d in unsupported)
        return CheckResult(
            "runtime.devices",
            title,
            WARN,
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
        k: bnb.get(k)
        for k in ("version", "backend", "library_class", "library_file", "load_error", "rocm_gpu_arch", "log")
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
            "runtime.bnb_library",
            title,
            FAIL,
            f"bitsandbytes fell back to its mock library ({cls}): {load_error.splitlines()[0]} — {fix}",
            evidence,
        )
    loaded = Path(bnb.get("library_file") or "?").name
    devices = (probe.get("torch") or {}).get("devices") or []
    if cls == NATIVE_CLASS and loaded == want.expected_bnb_library:
        return CheckResult("runtime.bnb_library", title, PASS, f"{cls} from {bnb.get('library_file')}", evidence)
    if cls == NATIVE_CLASS:
        return CheckResult(
            "runtime.bnb_library",
            title,
            FAIL,
            f"bitsandbytes loaded {loaded}, not {want.expected_bnb_library} — "
            "unset BNB_ROCM_VERSION or install the matching torch/ROCm",
            evidence,
        )
    if not devices:
        # bitsandbytes only tries its GPU library when torch sees a GPU: without one it loads the CPU library.
        return CheckResult(
            "runtime.bnb_library",
            title,
            WARN if (want.device == "cpu" or not want.gpu_required) else FAIL,
            f"bitsandbytes loaded its CPU library {loaded} because torch sees no GPU: "
            f"{want.expected_bnb_library} was not loaded in this process (the static check covers its linkage)",
            evidence,
        )
    return CheckResult(
        "runtime.bnb_library",
        title,
        FAIL,
        f"bitsandbytes loaded {loaded} ({cls}) although torch sees {len(devices)} GPU(s)",
        evidence,
    )


def judge_runtime(probe_run: ProbeRun, want: RuntimeExpectations) -> list[CheckResult]:
    """Check 3 (without the maps comparison, verify/checks/maps.py, and NF4, verify/checks/nf4.py) from one probe
    run."""
    if probe_run.data is None:
        return [
            CheckResult(
                "runtime.torch",
                "the runtime probe ran in the venv",
                FAIL,
                f"runtime probe failed: {probe_run.error}",
                probe_run.to_evidence(),
            )
        ]
    probe = probe_run.data
    return [check_torch_runtime(probe, want), check_devices(probe, want), check_bnb_library(probe, want)]


# --- this run's check ------------------------------------------------------------------------------------------------


def probe(host: Host) -> ProbeRun | None:
    """This run's probe, run once for the runtime, maps and NF4 checks (None: --static-only)."""
    return host.shared(_run_probe)


def _run_probe(host: Host) -> ProbeRun | None:
    options = host.options
    account = host.probe_account
    if account is None or host.runtime_blocked:
        return None
    refusal = root_probe_refusal(host.venv.root) if account.uid == 0 else None
    if refusal is not None:
        return ProbeRun(None, -1, (), refusal)
    return run_probe(host.venv.python, options.device, env=options.environ, timeout=options.timeout, account=account)


def run(host: Host) -> list[CheckResult]:
    if host.runtime_blocked and not host.options.static_only:
        return [
            CheckResult(
                "runtime.torch",
                "the runtime probe ran in the venv",
                FAIL,
                f"runtime probe not run: {host.runtime_blocked}",
                {},
            )
        ]
    found = probe(host)
    if found is None:
        return []
    want = RuntimeExpectations.of(host.release, host.options.device, host.options.gpu_required)
    return judge_runtime(found, want)


def facts(host: Host, results: list[CheckResult]) -> dict:
    found = probe(host)
    data = (found.data if found else None) or {}
    devices = (data.get("torch") or {}).get("devices") or []
    gpus = None
    if found is not None:
        archs = host.release.gpu_archs
        gpus = tuple(
            Gpu(
                d.get("index"),
                d.get("name"),
                base_arch(d.get("arch")),
                arch_supported(d.get("arch"), archs),
                d.get("integrated"),
                bool(d.get("work", True)),
            )
            for d in devices
        )
    if found is None:
        mode = "none"
    elif host.options.device == "cpu" or not devices:
        mode = "cpu"
    else:
        mode = "gpu"
    choice = linkage.inputs(host).choice  # the library bitsandbytes loaded, else the one it would pick
    loaded = posixpath.basename((data.get("bitsandbytes") or {}).get("library_file") or "")
    return {
        "bnb_library": loaded or (choice.name if choice else None),
        "gpus": gpus,
        "device_mode": mode,
        # Who ran the venv's code (None: nothing of it ran).
        "probe_account": found.account.facts() if found is not None and found.account is not None else None,
    }
