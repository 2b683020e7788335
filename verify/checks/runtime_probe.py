"""The runtime probe: runs *inside the venv* (its python, with torch and bitsandbytes) and reports what really happens.

Self-contained on purpose: `runtime.py` feeds this file's source to `VENV/bin/python -B -` on stdin, so it
imports nothing from `verify` (no sys.path change, no pyelftools in the probed process) and runs the same from a
checkout and from the zipapp. It measures and records; judging is done by the caller with the host's python3.

Steps, each recorded even when an earlier one failed:
1. `import torch`: version, torch.version.hip, torch.cuda.is_available(), every visible device and its gcnArchName
   (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES are applied by the HIP runtime itself; their values are recorded),
   whether it is an APU's integrated GPU (the device's `is_integrated`, else its arch among --integrated-arch), and
   whether it is meant for work: an integrated GPU beside a discrete one is not (AMD: the runtime may crash with it);
2. `import bitsandbytes`: the native library object's class — bitsandbytes swallows a load failure and installs a
   mock (`ErrorHandlerMockBNBNativeLibrary`) — the file it loaded, or the load error it kept;
3. the files mapped in this process (/proc/self/maps) right after the imports, and again after the NF4 runs;
4. NF4 on each device meant for work: quantize/dequantize, matmul_4bit, a Linear4bit layer against its float layer, with
timings
   and peak GPU memory.

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
                nf4.append(nf4_smoke(torch, bnb, device, args.size, args.blocksize, args.seed))
            except BaseException as error:  # noqa: BLE001
                nf4.append({"device": device, "errors": {"setup": one_line(error)}, "timings_ms": {}})
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
