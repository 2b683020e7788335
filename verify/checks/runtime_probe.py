"""The runtime probe: runs *inside the venv* (its python, with torch and bitsandbytes) and reports what really happens.

Self-contained on purpose: `runtime.py` feeds this file's source to `VENV/bin/python -B -` on stdin, so it
imports nothing from `verify` (no sys.path change, no pyelftools in the probed process) and runs the same from a
checkout and from the installed verifier. It measures and records; the caller judges, with the host's python3.

Steps, each recorded even when an earlier one failed:
1. `import torch`: version, torch.version.hip, torch.cuda.is_available(), every visible device and its gcnArchName
   (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES are applied by the HIP runtime itself; their values are recorded),
   whether it is an APU's integrated GPU (the device's `is_integrated`, else its arch among --integrated-arch), and
   whether it is meant for work: an integrated GPU beside a discrete one is not (AMD: the runtime may crash with it);
2. `import bitsandbytes`: the native library object's class — bitsandbytes swallows a load failure and installs a
   mock (`ErrorHandlerMockBNBNativeLibrary`) — the file it loaded, or the load error it kept;
3. the files mapped in this process (/proc/self/maps) right after the imports, and again after the NF4 runs;
4. NF4 on each device meant for work: quantize/dequantize, matmul_4bit, a Linear4bit layer against its float layer,
   with timings and peak GPU memory;
5. on the same devices, every path bitsandbytes dispatches a 4-bit inference matmul to (`nf4_paths`): fp16 and bf16,
   with and without double quantization, M (rows: the tokens of a step) from 1 to 64, K a multiple of the blocksize and
   not one, through `matmul_4bit` and `Linear4bit` — each against `x @ dequantize_4bit(w).T` in float32 (the kernel's
   own error) and against the float weight (the quantization error), with the path bitsandbytes' own dispatch code
   says that shape takes on this device (`Dispatch`).

Output: one JSON document on the *original* stdout; everything else (library chatter) is sent to stderr.
"""

import argparse
import importlib
import json
import logging
import os
import sys
import time
import traceback

ENV_KEYS = (
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "BNB_ROCM_VERSION",
    "BNB_CUDA_VERSION",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "HSA_OVERRIDE_GFX_VERSION",
)


# The 4-bit matmuls of step 5 (verify/checks/nf4.py judges them and names the same numbers). bitsandbytes 0.50.1 picks
# the kernel of an inference matmul by M, the rows of the input — the tokens of one step: one-token decoding and a
# prompt take different kernels — by dtype, by double quantization, and by whether K is a multiple of the blocksize.
PATH_DTYPES = ("float16", "bfloat16")
PATH_DOUBLE_QUANT = (False, True)
PATH_ROWS = (1, 2, 3, 4, 5, 8, 9, 16, 64)  # M: each side of every threshold bitsandbytes uses (4, 8, 64 …)
PATH_INNER = (256, 288)  # K: a multiple of the blocksize 64, and not one (the fused kernels need a multiple)
PATH_OUTER = 256  # N
PATH_BLOCKSIZE = 64
PATH_APIS = ("matmul_4bit", "Linear4bit")
PATH_SEED_OFFSET = 1  # the matrix's inputs come from --seed + 1, apart from the 1024x1024 smoke's

# The paths, as the report names them.
FUSED = "fused"  # bitsandbytes' fused 4-bit GEMM/GEMV kernel (cgemm_4bit_*) on a GPU
DEQUANTIZE = "dequantize+linear"  # dequantize_4bit, then torch's F.linear
CPU_PACKED = "cpu-packed"  # the packed AVX512-BF16 CPU kernel (gemv_4bit, any M), computing in bf16
CPU_KERNEL = "cpu-gemm_4bit"  # a CPU kernel registered for bitsandbytes::gemm_4bit (bitsandbytes 0.50.1 has none)
UNKNOWN = "unknown"


def one_line(error):
    """An exception as one line: its type and the first non-empty line of its message."""
    text = str(error).strip()
    for line in text.splitlines():
        line = line.strip(" 🚨")
        if line:
            text = line
            break
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def mapped_files():
    """Every file mapped into this process: [{path, dev, inode}], in first-mapped order, each once."""
    seen = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            inode = int(parts[4])
            path = parts[5].strip()
            if inode == 0 or not path.startswith("/"):
                continue
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            seen.setdefault(path, {"path": path, "dev": parts[3], "inode": inode})
    return list(seen.values())


class _Records(logging.Handler):
    """Keeps bitsandbytes' log lines: its load error is logged, not raised."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        try:
            message = record.getMessage()
        except Exception:  # a broken log call must not break the probe
            message = str(record.msg)
        self.lines.append(f"{record.levelname}: {message.strip()}")


def probe_torch(result, integrated_archs=()):
    import torch

    info = {
        "file": torch.__file__,
        "version": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None),
    }
    result["torch"] = info
    info["cuda_available"] = bool(torch.cuda.is_available())
    devices = []
    if info["cuda_available"]:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            arch = getattr(props, "gcnArchName", None)
            flag = getattr(props, "is_integrated", None)
            devices.append(
                {
                    "index": index,
                    "name": props.name,
                    "arch": arch,
                    "total_memory": int(props.total_memory),
                    "integrated": bool(flag) if flag is not None else (arch or "").split(":")[0] in integrated_archs,
                }
            )
    # With a discrete GPU present, an integrated one is not for work (NF4 skips it); an APU alone is the work GPU.
    discrete = any(not d["integrated"] for d in devices)
    for device in devices:
        device["work"] = not (device["integrated"] and discrete)
    info["devices"] = devices
    return torch


def probe_bitsandbytes(result):
    records = _Records()
    bnb_logger = logging.getLogger("bitsandbytes")
    bnb_logger.addHandler(records)
    info = {}
    result["bitsandbytes"] = info
    import_error = None
    try:
        importlib.import_module("bitsandbytes")
    except Exception as error:
        # The native library is chosen in bitsandbytes.cextension, early in the import: read it even when a later
        # part of the package failed to import.
        import_error = error
    finally:
        bnb_logger.removeHandler(records)
        info["log"] = records.lines[-20:]
    cextension = sys.modules.get("bitsandbytes.cextension")
    if cextension is None or not hasattr(cextension, "lib"):
        if import_error is not None:
            raise import_error
        raise RuntimeError("bitsandbytes.cextension has no 'lib': not bitsandbytes 0.50-like")
    bitsandbytes = sys.modules.get("bitsandbytes")
    lib = cextension.lib
    # Read the instance dict: the mock's __getattr__ answers *any* name with a function.
    state = vars(lib)
    loaded = state.get("_lib")
    info.update(
        {
            "version": getattr(bitsandbytes, "__version__", None) or _dist_version("bitsandbytes"),
            "file": getattr(cextension, "__file__", None),
            "backend": getattr(cextension, "BNB_BACKEND", None),
            "rocm_gpu_arch": getattr(cextension, "ROCM_GPU_ARCH", None),
            "library_class": type(lib).__name__,
            "library_file": getattr(loaded, "_name", None),
            "load_error": state.get("error_msg"),
        }
    )
    if import_error is not None:
        raise import_error
    return bitsandbytes


def _dist_version(name):
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def _sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _timed(torch, device, timings, name, func):
    _sync(torch, device)
    start = time.perf_counter()
    value = func()
    _sync(torch, device)
    timings[name] = round((time.perf_counter() - start) * 1000.0, 3)
    return value


def nf4_smoke(torch, bnb, device, size, blocksize, seed):
    """NF4 kernels on one device. Inputs are made on the CPU from a fixed seed: every device gets the same numbers."""
    import bitsandbytes.functional as F

    on_gpu = device.startswith("cuda")
    dtype = torch.float16 if on_gpu else torch.float32
    out = {"device": device, "dtype": str(dtype).replace("torch.", ""), "shape": [size, size], "blocksize": blocksize}
    errors = {}
    timings = {}
    out["errors"] = errors
    out["timings_ms"] = timings
    generator = torch.Generator().manual_seed(seed)
    matrix = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    weight = torch.empty(size, size)
    torch.nn.init.xavier_uniform_(weight, generator=generator)
    weight = weight.to(device=device, dtype=dtype)
    inputs = torch.randn(64, size, generator=generator).to(device=device, dtype=dtype)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats(device)
        base_memory = torch.cuda.memory_allocated(device)

    # Attribute lookups go through the modules at call time, so a patched function is the one measured.
    try:
        packed, state = _timed(
            torch,
            device,
            timings,
            "quantize",
            lambda: F.quantize_4bit(matrix, blocksize=blocksize, quant_type="nf4", compress_statistics=False),
        )
        restored = _timed(torch, device, timings, "dequantize", lambda: F.dequantize_4bit(packed, state))
        err = (matrix - restored).abs().float()
        out["roundtrip_mean_abs_error"] = err.mean().item()
        out["roundtrip_mean_rel_error"] = (err / (matrix.abs().float() + 1e-8)).mean().item()
        out["packed_bytes"] = int(packed.numel() * packed.element_size())
    except Exception as error:
        errors["quantize_4bit/dequantize_4bit"] = one_line(error)

    try:
        wq, wstate = F.quantize_4bit(weight, blocksize=blocksize, quant_type="nf4", compress_statistics=False)
        got = _timed(torch, device, timings, "matmul_4bit", lambda: bnb.matmul_4bit(inputs, wq.t(), wstate))
        want = inputs @ weight.t()
        out["matmul_mean_abs_error"] = (got - want).abs().float().mean().item()
    except Exception as error:
        errors["matmul_4bit"] = one_line(error)

    try:
        float_layer = torch.nn.Linear(size, size, bias=True)
        with torch.no_grad():
            float_layer.weight.copy_(weight.float().cpu())
            float_layer.bias.copy_(torch.randn(size, generator=generator) * 0.01)
        layer = bnb.nn.Linear4bit(size, size, bias=True, compute_dtype=dtype, quant_type="nf4")
        layer.weight = bnb.nn.Params4bit(
            float_layer.weight.data.clone(), requires_grad=False, quant_type="nf4", blocksize=blocksize
        )
        layer.bias = torch.nn.Parameter(float_layer.bias.data.clone(), requires_grad=False)
        layer = layer.to(device)  # Params4bit quantizes on the move to the device
        float_layer = float_layer.to(device=device, dtype=dtype)
        with torch.no_grad():
            want = float_layer(inputs).float().flatten()
            got = _timed(torch, device, timings, "linear4bit_forward", lambda: layer(inputs)).float().flatten()
        out["linear4bit_cosine"] = torch.nn.functional.cosine_similarity(got, want, dim=0).item()
        out["linear4bit_weight_bytes"] = int(layer.weight.numel() * layer.weight.element_size())
        out["float16_weight_bytes"] = size * size * 2
    except Exception as error:
        errors["Linear4bit"] = one_line(error)

    if on_gpu:
        out["gpu_peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(device) - base_memory)
    return out


def _has_kernel(torch, op, key):
    """Whether torch's dispatcher holds a kernel of `op` for dispatch key `key` (None: torch cannot say)."""
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))
    except Exception:  # noqa: BLE001 — a private API: an older or newer torch may lack it
        return None


class Dispatch:
    """Which kernel bitsandbytes runs for a 4-bit inference matmul on one device — asked of bitsandbytes' own code, so
    the report says what *this* wheel does on *this* device, not what we believe it does.

    Inference (no grad) calls `torch.ops.bitsandbytes.gemm_4bit` for every M. On a GPU its kernel (backends/cuda/ops.py)
    takes the dequantize path past `_gemm_4bit_custom_max_m` rows or when K is not a multiple of the blocksize, and
    otherwise asks `_gemm_4bit_use_custom_fn` (`_gemm_4bit_use_custom_rocm` on ROCm: by gfx arch; `…_cuda`: by SM).
    On the CPU, bitsandbytes 0.50.1 registers no gemm_4bit kernel: its default implementation dequantizes and calls
    F.linear — except that a Linear4bit in inference on a CPU with AVX512-BF16 repacks its weight on the first call
    and runs the packed gemv_4bit kernel at every M (read back from the weight's quant_state after the call).
    A function or attribute that is missing is reported (`problems`), and the shape's path is "unknown".
    """

    def __init__(self, torch, device):
        self.torch = torch
        self.on_gpu = device.startswith("cuda")
        self.index = int(device.split(":", 1)[1]) if self.on_gpu else None
        self.problems = []
        key = "CUDA" if self.on_gpu else "CPU"  # ROCm builds of torch dispatch GPU tensors under CUDA too
        self.own_kernel = _has_kernel(torch, "bitsandbytes::gemm_4bit", key)
        self.facts = {"device": device, "gemm_4bit_kernel_for_" + key: self.own_kernel, "problems": self.problems}
        self.choose = self.max_rows = None
        if self.on_gpu:
            self._ask_gpu()
        else:
            self._ask_cpu()

    def _ask_gpu(self):
        ops = sys.modules.get("bitsandbytes.backends.cuda.ops")
        if ops is None:
            self.problems.append("bitsandbytes.backends.cuda.ops was not imported: its dispatch cannot be asked")
            return
        self.choose = getattr(ops, "_gemm_4bit_use_custom_fn", None)
        self.max_rows = getattr(ops, "_gemm_4bit_custom_max_m", None)
        for name, value in (("_gemm_4bit_use_custom_fn", self.choose), ("_gemm_4bit_custom_max_m", self.max_rows)):
            if value is None:
                self.problems.append(f"bitsandbytes.backends.cuda.ops has no {name}: the paths are unknown")
        chooser = getattr(self.choose, "__wrapped__", self.choose)  # functools.cache keeps the function here
        self.facts["asked"] = f"bitsandbytes.backends.cuda.ops.{getattr(chooser, '__name__', '?')}"
        self.facts["max_rows"] = self.max_rows
        self.facts["backend"] = "rocm" if getattr(self.torch.version, "hip", None) else "cuda"
        try:
            if self.facts["backend"] == "rocm":
                self.facts["arch"] = ops._rocm_gfx_arch(self.index)
            else:
                major, minor = self.torch.cuda.get_device_capability(self.index)
                self.facts["arch"] = f"sm_{major}{minor}"
        except Exception as error:  # noqa: BLE001
            self.problems.append(f"the device's arch: {one_line(error)}")

    def _ask_cpu(self):
        self.facts["backend"] = "cpu"
        try:
            import bitsandbytes.functional as F

            self.facts["avx512bf16"] = bool(F.has_avx512bf16())
        except Exception as error:  # noqa: BLE001
            self.problems.append(f"bitsandbytes.functional.has_avx512bf16: {one_line(error)}")

    def path(self, dtype, rows, inner, packed):
        """The path of one inference matmul: `packed` says whether the weight's quant_state is in the packed CPU
        format after the call."""
        if packed:
            return CPU_PACKED
        if not self.on_gpu:
            return CPU_KERNEL if self.own_kernel else DEQUANTIZE
        if self.own_kernel is False:
            return DEQUANTIZE  # no GPU kernel registered: bitsandbytes' default implementation
        if self.choose is None or self.max_rows is None:
            return UNKNOWN
        if rows > self.max_rows or inner % PATH_BLOCKSIZE:
            return DEQUANTIZE
        try:
            return FUSED if self.choose(self.index, dtype, rows, PATH_OUTER, inner) else DEQUANTIZE
        except Exception as error:  # noqa: BLE001
            message = f"{self.facts.get('asked')}: {one_line(error)}"
            if message not in self.problems:
                self.problems.append(message)
            return UNKNOWN


def _finite(value):
    """A float for the report, or None when it is NaN or infinite (JSON has neither)."""
    value = float(value)
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _quantized_weight(torch, bnb, api, weight, dtype, double, device):
    """(run(x), dequantized weight in float32, packed()) for one API: `packed()` reads, after a call, whether the weight
    was repacked for bitsandbytes' AVX512-BF16 CPU kernel. The reference is dequantized before the first call."""
    import bitsandbytes.functional as F

    weight = weight.to(dtype)
    if api == "matmul_4bit":
        packed, state = F.quantize_4bit(
            weight.to(device), blocksize=PATH_BLOCKSIZE, quant_type="nf4", compress_statistics=double
        )
        restored = F.dequantize_4bit(packed, state).float()
        return (
            lambda x: bnb.matmul_4bit(x, packed.t(), state),
            restored,
            lambda: bool(getattr(state, "packing_format_for_cpu", False)),
        )
    layer = bnb.nn.Linear4bit(
        weight.shape[1], weight.shape[0], bias=False, compute_dtype=dtype, compress_statistics=double, quant_type="nf4"
    )
    layer.weight = bnb.nn.Params4bit(
        weight.clone(), requires_grad=False, quant_type="nf4", blocksize=PATH_BLOCKSIZE, compress_statistics=double
    )
    layer = layer.to(device).eval()  # Params4bit quantizes on the move to the device
    restored = F.dequantize_4bit(layer.weight.data, layer.weight.quant_state).float()
    return (
        layer,
        restored,
        lambda: bool(getattr(layer.weight.quant_state, "packing_format_for_cpu", False)),
    )


def nf4_paths(torch, bnb, device, seed):
    """Every 4-bit inference matmul path on one device (step 5): one case per API x dtype x double quantization x K x M.

    kernel_error: max over the outputs of |out - x @ w_dq.T| / (|x| @ |w_dq|.T), both in float32 with w_dq =
    dequantize_4bit(w) — the kernel's own rounding, in units that floating-point error analysis bounds (nf4.py);
    quantization_error: ||out - x @ w.T|| / ||x @ w.T|| against the float weight. A group (API, dtype, double
    quantization, K) that raises is one error, and its cases are missing. `planned`: the path of each dtype, K and M
    as the dispatch answers before anything runs — also when nothing can run.
    """
    dispatch = Dispatch(torch, device)
    cases = []
    errors = {}
    planned = [
        {"dtype": name, "k": inner, "m": rows, "path": dispatch.path(getattr(torch, name), rows, inner, False)}
        for name in PATH_DTYPES
        for inner in PATH_INNER
        for rows in PATH_ROWS
    ]
    out = {"dispatch": dispatch.facts, "planned": planned, "cases": cases, "errors": errors}
    start = time.perf_counter()
    threads = torch.get_num_threads()
    if not device.startswith("cuda"):
        # Small matmuls: on a busy CPU, OpenMP's spinning threads make them ten times slower, not faster.
        torch.set_num_threads(1)
    try:
        _run_paths(torch, bnb, device, seed, dispatch, cases, errors)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)  # a kernel's asynchronous error surfaces here
    except Exception as error:  # noqa: BLE001
        errors["synchronize"] = one_line(error)
    finally:
        torch.set_num_threads(threads)
    out["ms"] = round((time.perf_counter() - start) * 1000.0, 3)
    return out


def _run_paths(torch, bnb, device, seed, dispatch, cases, errors):
    generator = torch.Generator().manual_seed(seed + PATH_SEED_OFFSET)
    for dtype_name in PATH_DTYPES:
        dtype = getattr(torch, dtype_name)
        for double in PATH_DOUBLE_QUANT:
            for inner in PATH_INNER:
                # Made on the CPU from the seed: every device multiplies the same numbers.
                weight = torch.randn(PATH_OUTER, inner, generator=generator) * 0.05
                inputs = torch.randn(max(PATH_ROWS), inner, generator=generator)
                for api in PATH_APIS:
                    group = f"{api} {dtype_name}{' double-quant' if double else ''} K={inner}"
                    try:
                        with torch.no_grad():
                            _run_group(torch, bnb, device, dispatch, api, weight, inputs, dtype, double, cases)
                    except Exception as error:  # noqa: BLE001 — a path that raises is a finding
                        errors[group] = one_line(error)


def _run_group(torch, bnb, device, dispatch, api, weight, inputs, dtype, double, cases):
    run, restored, packed = _quantized_weight(torch, bnb, api, weight, dtype, double, device)
    exact_weight = weight.to(dtype).float().to(device)
    for rows in PATH_ROWS:
        x = inputs[:rows].to(device=device, dtype=dtype)
        got = run(x).float()
        wide = x.float()
        reference = wide @ restored.t()
        scale = (wide.abs() @ restored.abs().t()).clamp_min(1e-30)
        exact = wide @ exact_weight.t()
        cases.append(
            {
                "api": api,
                "dtype": str(dtype).replace("torch.", ""),
                "double_quant": double,
                "k": weight.shape[1],
                "m": rows,
                "path": dispatch.path(dtype, rows, weight.shape[1], packed()),
                "kernel_error": _finite(((got - reference).abs() / scale).max()),
                "quantization_error": _finite((got - exact).norm() / exact.norm().clamp_min(1e-30)),
            }
        )


def main(argv=None):
    parser = argparse.ArgumentParser(prog="runtime_probe")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--blocksize", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument(
        "--integrated-arch",
        action="append",
        default=[],
        help="a gfx target only APUs carry (when the device does not say is_integrated)",
    )
    args = parser.parse_args(argv)

    # Keep the report's channel clean: native libraries and bitsandbytes print to stdout.
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    result = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "pid": os.getpid(),
        # Who this process really is (the verifier chose the account; this is what the kernel says).
        "uid": os.getuid(),
        "groups": sorted(set(os.getgroups()) | {os.getgid()}),
        "env": {key: os.environ[key] for key in ENV_KEYS if key in os.environ},
        "errors": {},
    }
    torch = bnb = None
    try:
        torch = probe_torch(result, frozenset(args.integrated_arch))
    except BaseException as error:  # noqa: BLE001 — any failure is a finding, never a crash of the probe
        result["errors"]["import torch"] = one_line(error)
        result["errors"]["import torch (traceback)"] = traceback.format_exc(limit=4)
    try:
        bnb = probe_bitsandbytes(result)
    except BaseException as error:  # noqa: BLE001
        result["errors"]["import bitsandbytes"] = one_line(error)
    try:
        result["maps_after_import"] = mapped_files()
    except OSError as error:
        result["errors"]["/proc/self/maps"] = one_line(error)

    nf4 = []
    if torch is not None and bnb is not None:
        devices = []
        if args.device == "auto":
            devices = [f"cuda:{d['index']}" for d in result["torch"].get("devices", []) if d.get("work", True)]
        # No GPU (or --device cpu): still exercise the kernels on the CPU; the caller decides what that is worth.
        if not devices:
            devices = ["cpu"]
        for device in devices:
            try:
                run = nf4_smoke(torch, bnb, device, args.size, args.blocksize, args.seed)
            except BaseException as error:  # noqa: BLE001
                run = {"device": device, "errors": {"setup": one_line(error)}, "timings_ms": {}}
            try:
                run["paths"] = nf4_paths(torch, bnb, device, args.seed)
            except BaseException as error:  # noqa: BLE001
                run["paths"] = {"cases": [], "errors": {"setup": one_line(error)}}
            nf4.append(run)
    result["nf4"] = nf4
    try:
        result["maps_after_nf4"] = mapped_files()
    except OSError:
        pass

    json.dump(result, report_out)
    report_out.write("\n")
    report_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
