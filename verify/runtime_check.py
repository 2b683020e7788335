"""Checks 3 and 4 — run the probe in the venv, then judge what it saw (torch, GPUs, bitsandbytes' library, NF4).

`run_probe` is the one place in `verify/` that starts a process: the venv's own python, fed `runtime_probe.py` on
stdin (so the probed process imports nothing of ours). Everything after that is pure: `judge_runtime` turns the
probe's JSON into `CheckResult`s. The comparison of /proc/self/maps with the static prediction is in
`maps_compare.py`.

Who runs the probe: the venv's code belongs to its owner, so the verifier (root, on a host) runs it as that account
(`ProbeAccount`: its uid, gid and every group it is in — render and video reach the GPU as the owner would — with
the owner's HOME, USER, LOGNAME, SHELL and a default PATH, cwd /). It runs it as root only for a venv in which
nothing is owned or writable by another account (`root_probe_refusal`), and never imports anything of the venv
itself.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import signal
import stat
import subprocess
import tempfile
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
# What the probe of another account gets from the caller's environment: what selects GPUs and libraries, the locale.
# The rest (HOME, PATH, SUDO_*, PYTHON* …) is root's, not the owner's.
PASSED_TO_OWNER = ("HIP_", "ROCR_", "HSA_", "GPU_", "AMD_", "CUDA_", "BNB_", "PYTORCH_", "OMP_", "LD_LIBRARY_PATH",
                   "LD_PRELOAD", "LANG", "LC_")
OWNER_PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_OUTPUT_LIMIT = 16 * 1024 * 1024  # the probe's report is well under 1 MiB (its maps lists are the bulk)


class ProbeAccountError(ValueError):
    """The account to run the probe as cannot be used (bad input, exit code 2); one line naming it and the fix."""


@dataclass(frozen=True)
class ProbeAccount:
    """The account the runtime probe runs as."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]  # every group it is in (initgroups), its primary group included
    home: str
    shell: str

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> "ProbeAccount":
        groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, entry.pw_shell or "/bin/sh")

    def group_names(self) -> list[str]:
        names = []
        for gid in self.groups:
            try:
                names.append(grp.getgrgid(gid).gr_name)
            except KeyError:
                names.append(str(gid))
        return names

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "uid": self.uid, "groups": self.group_names()}

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        env = {key: value for key, value in environ.items() if key.startswith(PASSED_TO_OWNER)}
        env.update(HOME=self.home, USER=self.user, LOGNAME=self.user, SHELL=self.shell, PATH=OWNER_PATH)
        return env


def probe_account(requested: str | None, venv_root: Path) -> ProbeAccount:
    """The account to run the probe as: `requested` (the controller passes venv_owner), else — run by hand — the
    owner of the venv's directory when this is root, or this process's own account."""
    euid = os.geteuid()
    try:
        if requested is not None:
            entry = pwd.getpwnam(requested)
        elif euid == 0:
            entry = pwd.getpwuid(os.stat(venv_root).st_uid)
        else:
            entry = pwd.getpwuid(euid)
    except KeyError:
        what = f"account {requested!r}" if requested is not None else f"the owner of {venv_root}"
        raise ProbeAccountError(f"--probe-user: {what} does not exist — pass the venv's owner (venv_owner)") from None
    except OSError as error:
        raise ProbeAccountError(f"{venv_root}: {error.strerror}") from None
    if euid != 0 and entry.pw_uid != euid:
        raise ProbeAccountError(f"--probe-user {entry.pw_name}: only root can run the probe as another account — "
                                f"run the check as {entry.pw_name}, or as root")
    return ProbeAccount.of(entry)


def root_probe_refusal(venv_root: Path) -> str | None:
    """Why root must not run the probe in this venv: its first entry owned by, or writable by, an account other than
    root (a .pth file there runs at interpreter start); None when it is root's alone. Nothing is followed or opened."""
    for directory, subdirectories, names in os.walk(venv_root):
        for name in subdirectories + names:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            writable = not stat.S_ISLNK(info.st_mode) and (
                info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != 0))
            if info.st_uid != 0 or writable:
                try:
                    owner = pwd.getpwuid(info.st_uid).pw_name
                except KeyError:
                    owner = f"uid {info.st_uid}"
                why = f"belongs to {owner}" if info.st_uid != 0 else "is writable by other accounts"
                return (f"not run as root: {path} {why}, and code in the venv would run as root — pass --probe-user "
                        f"with the venv's owner (venv_owner), or rebuild the venv as root's")
    return None


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
    account: ProbeAccount | None = None,
) -> ProbeRun:
    """Run the probe with `python` (the venv's interpreter) and the caller's environment (HIP_VISIBLE_DEVICES …), as
    `account` when that is not this process's own (then with that account's environment, see ProbeAccount).

    Python's own subprocess switches the account (setgroups, setregid, setreuid in the child, before exec): the
    verifier is standard library only and needs no setpriv/runuser on the host, and no shell sits in between.
    -B: write no .pyc into the venv — verification changes nothing on the host.
    """
    command = [
        str(python), "-B", "-", "--device", device,
        "--size", str(nf4_bounds.SHAPE[0]), "--blocksize", str(nf4_bounds.BLOCKSIZE), "--seed", str(nf4_bounds.SEED),
    ]
    environ = dict(os.environ if env is None else env)
    switch = {}
    if account is not None and account.uid != os.geteuid():
        switch = {"user": account.uid, "group": account.gid, "extra_groups": list(account.groups)}
        environ = account.environment(environ)
    # Its output goes to private unnamed files, of which only the tails are read: the probe is the owner's code, and
    # root's verifier must neither take in whatever it prints nor wait for a child it left holding a pipe. Its own
    # session, so that what it started is stopped with it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, env=environ,
                                       cwd="/",  # readable by every account
                                       start_new_session=True, **switch)
        except OSError as error:
            return ProbeRun(None, -1, (), f"cannot run {python}: {error.strerror}")
        timed_out = False
        try:
            process.communicate(probe_source().encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _stop_session(process)
        stdout, stderr = _tail(out, PROBE_OUTPUT_LIMIT), _tail(err, 64 * 1024)
    stderr_tail = tuple(line for line in stderr.splitlines() if line.strip())[-10:]
    if timed_out:
        return ProbeRun(None, -1, stderr_tail, f"the probe did not finish within {timeout:.0f} s")
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
        return ProbeRun(None, code, stderr_tail, f"the probe produced no report ({why}; last line: {last})")
    return ProbeRun(data, process.returncode, stderr_tail)


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
