"""The model probe: runs *inside the venv* (its python, as the venv's owner) and loads a causal LM in 4-bit NF4 with
Hugging Face Transformers on each device, next to its 16-bit reference, and measures what a user would notice.

Self-contained like `runtime_probe.py`: `model.py` feeds this file's source to `VENV/bin/python -B -` on stdin,
so the probed process imports nothing from `verify`. It measures and records; `model.py` judges.

Two sources of the model:
- `synthetic`: a small Llama-architecture model built from a config with a fixed seed (on the CPU, so every device
  gets the same weights), saved with `save_pretrained` and reloaded from a private temporary directory;
- `--path DIR`: a checkpoint directory already on the host (safetensors only: a pickle checkpoint is code).
Either way it is loaded `local_files_only`, with the hub switched off (HF_HUB_OFFLINE, set before anything is
imported: on a CPU with AVX512-BF16, bitsandbytes itself asks the hub for a kernel at import when the `kernels`
package is installed), no remote code, and every cache (HF_HOME, torch's compile caches) inside that private directory,
removed at the end. `--time-limit`: the probe stops itself, reports what it measured and removes that directory.
OpenMP gets one thread unless the caller's environment says otherwise.

On each device in turn (every GPU that torch sees — torch.cuda is also ROCm's API —, only those of `--gpu INDEX`
when given: the verifier names the GPUs NF4 passed on; or the CPU):
1. the checkpoint in 4-bit NF4 (`BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")`): footprint, the
   parameter split (weights in 4-bit layers vs the rest, for the expected ratio), its logits on a fixed prompt (a
   seeded sequence of token ids: no tokenizer is loaded, the kernels are what is checked), greedy generation of N
   tokens twice — the first keeping the logits of each one-token step through the KV cache —, tokens/s, and a
   forward pass over the context and the generated tokens (one-token steps run another kernel than a many-token pass: on
   a GPU the fused one, which is where 4-bit generation breaks);
2. the same checkpoint in 16 bits, the reference: footprint, its logits on the prompt, and teacher-forced on the
   4-bit model's context and generated tokens; skipped when its weights cannot fit the GPU;
and on a GPU the peak device memory of each model.
The 16-bit dtype is float16 on a GPU and bfloat16 on the CPU: bitsandbytes' CPU 4-bit kernel computes in bfloat16
(its AVX512-BF16 path converts float16 inputs to bfloat16 and back), so a bfloat16 reference differs from the 4-bit
model by the quantization alone; bfloat16 takes the same two bytes, so the footprint ratio is the same. The bounds
hold for both dtypes (bench/model_bounds.py measures both on the CPU).

Output: one JSON document on the *original* stdout; everything else (library chatter, progress bars) goes to stderr.
"""

import argparse
import gc
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
# Llama's own rule for the MLP width: 8/3 of the hidden size, rounded up to a multiple of 256 (also a multiple of the
# 4-bit blocksize 64, which bitsandbytes' packed CPU kernel needs of every input width).
MLP_MULTIPLE = 256
HEAD_DIM = 64


def one_line(error):
    """An exception as one line: its type and the first non-empty line of its message."""
    text = str(error).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            text = line
            break
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def size_text(count):
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


class Device:
    """Where a model runs, and the device-specific calls the probe makes (the one boundary a GPU test mocks)."""

    gpu = False

    def __init__(self, name):
        self.name = name

    def placement(self):
        """What `device_map` and `.to()` get."""
        return self.name

    def describe(self):
        return {"device": self.name, "gpu": self.gpu}

    def sync(self):
        pass

    def reset_peak(self):
        pass

    def peak_bytes(self):
        return None

    def release(self):
        gc.collect()


class CudaDevice(Device):
    """A GPU through torch.cuda (HIP on ROCm builds)."""

    gpu = True

    def __init__(self, torch, index):
        super().__init__(f"cuda:{index}")
        self.torch = torch
        self.index = index

    def describe(self):
        props = self.torch.cuda.get_device_properties(self.index)
        return {
            "device": self.name,
            "gpu": True,
            "name": props.name,
            "arch": getattr(props, "gcnArchName", None),
            "total_memory": int(props.total_memory),
        }

    def sync(self):
        self.torch.cuda.synchronize(self.index)

    def reset_peak(self):
        self.sync()
        self.torch.cuda.reset_peak_memory_stats(self.index)

    def peak_bytes(self):
        self.sync()
        return int(self.torch.cuda.max_memory_allocated(self.index))

    def release(self):
        gc.collect()
        self.torch.cuda.empty_cache()


def choose_devices(torch, mode, gpus=None):
    """Every GPU torch sees (or those of `gpus`, the indexes the NF4 smoke passed on), else the CPU."""
    if mode == "auto" and torch.cuda.is_available():
        indexes = range(torch.cuda.device_count())
        devices = [CudaDevice(torch, index) for index in indexes if not gpus or index in gpus]
        if devices:
            return devices
    return [Device("cpu")]


def synthetic_config(transformers, args):
    hidden = args.hidden
    mlp = -(-(8 * hidden // 3) // MLP_MULTIPLE) * MLP_MULTIPLE
    heads = max(1, hidden // HEAD_DIM)
    return transformers.LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=args.layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max(256, args.prompt_tokens + args.new_tokens),
        # Untied: the output layer is its own full-precision weight, as in most checkpoints, and the logits are not a
        # copy of the (never quantized) input embedding.
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def build_synthetic(torch, transformers, args, directory):
    """A seeded Llama-architecture model, saved to `directory` (safetensors). Returns its config as a dict."""
    config = synthetic_config(transformers, args)
    torch.manual_seed(args.seed)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(directory)
    del model
    gc.collect()
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    return {key: getattr(config, key) for key in keys}


def unreadable(directory):
    """The checkpoint's files this account cannot read (safetensors writes its files 0600: a checkpoint saved by
    another account is often unreadable here, and safetensors then says 'No such file or directory')."""
    names = []
    for entry in os.scandir(directory):
        if entry.name == "config.json" or entry.name.endswith(".safetensors"):
            if not os.access(entry.path, os.R_OK):
                names.append(entry.name)
    return sorted(names)


def checkpoint_bytes(directory):
    total = 0
    for entry in os.scandir(directory):
        if entry.name.endswith(".safetensors") and entry.is_file(follow_symlinks=False):
            total += entry.stat(follow_symlinks=False).st_size
    return total


def count_parameters(torch, transformers, directory):
    """The checkpoint's parameter count, from its config on the meta device (no memory; only config.json is read)."""
    config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True, trust_remote_code=False)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    return int(sum(param.numel() for param in model.parameters()))


def load(transformers, directory, device, dtype, quantization_config=None):
    return transformers.AutoModelForCausalLM.from_pretrained(
        directory,
        dtype=dtype,
        device_map={"": device.placement()},
        quantization_config=quantization_config,
        local_files_only=True,
        use_safetensors=True,
        trust_remote_code=False,
    )


def parameter_split(torch, bnb, model):
    """(weights held by 4-bit layers, other parameter elements, buffer bytes) — counted from the module structure, so
    they do not depend on how (or whether) the weights were really packed."""
    quantized = 0
    other = 0
    in_4bit = set()
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            quantized += module.in_features * module.out_features
            in_4bit.add(id(module.weight))
    for param in model.parameters():
        if id(param) not in in_4bit:
            other += param.numel()
    buffers = sum(buf.numel() * buf.element_size() for buf in model.buffers())
    return quantized, other, buffers


def quant_types(bnb, model):
    found = set()
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            found.add(getattr(module.weight, "quant_type", None) or "?")
    return sorted(found)


def logits_of(torch, model, device, prompt):
    ids = prompt.to(device.placement())
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return out.logits[0].float().cpu()


def timed(device, timings, name, func):
    device.sync()
    start = time.perf_counter()
    value = func()
    device.sync()
    timings[name] = round((time.perf_counter() - start) * 1000.0, 3)
    return value


def generate(torch, transformers, model, device, prompt, new_tokens, pad_id, step_logits=False):
    """Greedy generation of `new_tokens` tokens: their ids, and with `step_logits` also the logits each step computed
    (one token per step through the KV cache, float32 on the CPU, one row per step)."""
    config = transformers.GenerationConfig(
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        num_beams=1,
        pad_token_id=pad_id,
        output_logits=step_logits,
        return_dict_in_generate=step_logits,
    )
    ids = prompt.to(device.placement())
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
    sequences = out.sequences if step_logits else out
    tokens = [int(token) for token in sequences[0, prompt.shape[1] :].cpu()]
    if not step_logits:
        return tokens
    return tokens, torch.stack([row[0].float().cpu() for row in out.logits])


def compare(torch, got, want):
    """(cosine of all logits, share of positions with the same top-1 token); the cosine is None when not finite (JSON
    has no NaN, and `logits_finite` says why)."""
    cosine = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0).item()
    top1 = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    return (cosine if math.isfinite(cosine) else None), top1


def decode_error(torch, steps, full):
    """The largest ||step - full|| / ||full|| over the generated positions: how far the logits of one-token decoding
    (through the KV cache) are from a forward pass over the whole sequence; None when not finite."""
    error = ((steps - full).norm(dim=-1) / full.norm(dim=-1).clamp_min(1e-30)).max().item()
    return error if math.isfinite(error) else None


def continuation(prompt, tokens):
    """The context followed by the generated tokens, as one sequence (1, n)."""
    return prompt.new_tensor([[*prompt[0].tolist(), *tokens]])


def generated_positions(logits, context, count):
    """The rows of a forward pass over context + generated that predict the generated tokens."""
    return logits[context - 1 : context - 1 + count]


def measure_device(torch, transformers, bnb, device, directory, args, prompt, pad_id, weight_bytes_16bit, out):
    """One device into `out` (already in the report, so that a time limit running out keeps what was measured): the
    4-bit model, then its 16-bit reference; every step recorded even when a later one fails.

    Generation is checked three ways: (a) the logits of one-token decoding through the KV cache against a forward pass
    of the same 4-bit model over the generated sequence (self-consistency: a one-token step runs another kernel than
    a many-token forward — on a GPU the fused one); (b) the 4-bit model's greedy continuation against the reference
    teacher-forced on the same tokens (top-1 agreement and logits cosine); (c) two greedy generations identical."""
    out.update(device.describe())
    on_gpu = device.gpu
    dtype = torch.float16 if on_gpu else torch.bfloat16
    if args.dtype != "auto":
        dtype = getattr(torch, args.dtype)
    out["dtype"] = str(dtype).replace("torch.", "")
    errors = out["errors"]
    timings = out["timings_ms"]
    context = prompt[:, : args.generate_from]
    logits = steps = sequence = None
    # Written before they are measured: a report with the keys and no values says "not measured", never "not asked".
    out.update(incremental_decode_error=None, continuation_top1=None, continuation_cosine=None)

    # 1. the checkpoint in 4-bit NF4.
    model = None
    try:
        quantization = transformers.BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=dtype,
        )
        device.reset_peak()
        model = timed(device, timings, "load_4bit", lambda: load(transformers, directory, device, dtype, quantization))
        model.eval()
        out["footprint_4bit"] = int(model.get_memory_footprint())
        quantized, other, buffers = parameter_split(torch, bnb, model)
        out["quantized_weights"] = quantized
        out["other_parameters"] = other
        out["buffer_bytes"] = buffers
        out["quant_types"] = quant_types(bnb, model)
        logits = timed(device, timings, "forward_4bit", lambda: logits_of(torch, model, device, prompt))
        out["logits_finite"] = bool(torch.isfinite(logits).all().item())
        first, steps = timed(
            device,
            timings,
            "generate_1",
            lambda: generate(torch, transformers, model, device, context, args.new_tokens, pad_id, step_logits=True),
        )
        second = timed(
            device,
            timings,
            "generate_2",
            lambda: generate(torch, transformers, model, device, context, args.new_tokens, pad_id),
        )
        out["generated"] = [first, second]
        out["generation_identical"] = first == second
        seconds = timings["generate_2"] / 1000.0
        out["tokens_per_s"] = round(len(second) / seconds, 2) if seconds > 0 else None
        sequence = continuation(context, first)
        full = timed(device, timings, "forward_continuation_4bit", lambda: logits_of(torch, model, device, sequence))
        out["decode_finite"] = bool(torch.isfinite(steps).all().item())
        out["incremental_decode_error"] = decode_error(
            torch, steps, generated_positions(full, context.shape[1], len(first))
        )
        out["peak_memory_4bit"] = device.peak_bytes()
    except Exception as error:  # noqa: BLE001
        errors["4-bit model"] = one_line(error)
        errors["4-bit model (traceback)"] = traceback.format_exc(limit=-6)
    finally:
        model = None  # the 4-bit model's memory back before the reference loads
        device.release()

    # 2. the reference in 16 bits, unless its weights alone exceed the device (a 13B model in fp16 on a 20 GiB GPU).
    total = out.get("total_memory")
    if total is not None and weight_bytes_16bit is not None and weight_bytes_16bit > total:
        out["reference_skipped"] = f"{size_text(weight_bytes_16bit)} of 16-bit weights cannot fit {size_text(total)}"
        return
    try:
        device.reset_peak()
        model = timed(device, timings, "load_reference", lambda: load(transformers, directory, device, dtype))
        model.eval()
        out["footprint_reference"] = int(model.get_memory_footprint())
        reference = timed(device, timings, "forward_reference", lambda: logits_of(torch, model, device, prompt))
        if logits is not None:
            out["logits_cosine"], out["top1_agreement"] = compare(torch, logits, reference)
        if sequence is not None:
            forced = timed(
                device, timings, "forward_continuation_reference", lambda: logits_of(torch, model, device, sequence)
            )
            forced = generated_positions(forced, context.shape[1], steps.shape[0])
            out["continuation_cosine"], _ = compare(torch, steps, forced)
            chosen = sequence[0, context.shape[1] :]
            out["continuation_top1"] = (forced.argmax(-1) == chosen).float().mean().item()
        out["peak_memory_reference"] = device.peak_bytes()
    except Exception as error:  # noqa: BLE001 — an out-of-memory or load failure is a finding
        errors["16-bit reference"] = one_line(error)
    finally:
        model = None
        device.release()


def versions(result, torch, transformers, bnb):
    result["versions"] = {
        "torch": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None),
        "transformers": transformers.__version__,
        "bitsandbytes": getattr(bnb, "__version__", None),
    }


def run(args, result, workdir, device_factory=choose_devices):
    start = time.perf_counter()
    import bitsandbytes as bnb
    import torch
    import transformers

    # Transformers imports lazily: touch what the probe uses, so that the import time is counted here.
    _ = transformers.LlamaForCausalLM, transformers.AutoModelForCausalLM, transformers.BitsAndBytesConfig
    result["import_ms"] = round((time.perf_counter() - start) * 1000.0, 3)
    versions(result, torch, transformers, bnb)
    model_info = {"source": "synthetic" if args.path is None else "path"}
    result["model"] = model_info
    if args.path is None:
        directory = os.path.join(workdir, "model")
        os.mkdir(directory, 0o700)
        start = time.perf_counter()
        model_info["config"] = build_synthetic(torch, transformers, args, directory)
        model_info["seed"] = args.seed
        model_info["build_ms"] = round((time.perf_counter() - start) * 1000.0, 3)
        vocab = model_info["config"]["vocab_size"]
    else:
        directory = args.path
        model_info["path"] = directory
        blocked = unreadable(directory)
        if blocked:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
            raise PermissionError(
                f"{directory}: {', '.join(blocked)} not readable by {user} — make the checkpoint "
                "readable by the venv's owner"
            )
        config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True, trust_remote_code=False)
        model_info["model_type"] = getattr(config, "model_type", None)
        vocab = int(getattr(config, "vocab_size", 0) or 0)
        if vocab <= 0:
            raise ValueError(f"{directory}/config.json has no vocab_size: not a causal LM checkpoint")
    model_info["checkpoint_bytes"] = checkpoint_bytes(directory)
    if not model_info["checkpoint_bytes"]:
        raise ValueError(
            f"{directory} has no .safetensors weights: a pickle checkpoint (pytorch_model.bin) is code "
            "and is not loaded — save it as safetensors"
        )
    model_info["parameters"] = count_parameters(torch, transformers, directory)
    weight_bytes_16bit = 2 * model_info["parameters"]

    generator = torch.Generator().manual_seed(args.seed + 1)
    low = min(3, vocab - 1)  # keep clear of the usual pad/bos/eos ids
    prompt = torch.randint(low, vocab, (1, args.prompt_tokens), generator=generator)
    model_info["prompt_tokens"] = args.prompt_tokens
    model_info["new_tokens"] = args.new_tokens
    pad_id = 0
    measurements = []
    result["devices"] = measurements
    for device in device_factory(torch, args.device, args.gpu):
        out = {"device": device.name, "gpu": device.gpu, "errors": {}, "timings_ms": {}}
        measurements.append(out)
        try:
            measure_device(torch, transformers, bnb, device, directory, args, prompt, pad_id, weight_bytes_16bit, out)
        except Exception as error:  # noqa: BLE001
            out["errors"]["setup"] = one_line(error)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="model_probe")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto")
    parser.add_argument("--gpu", type=int, action="append", help="only this GPU index (repeatable; default: every GPU)")
    parser.add_argument("--path", default=None, help="a checkpoint directory on this host (default: synthetic)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--generate-from", type=int, default=8, help="how many prompt tokens generation starts from")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--dtype", choices=("auto", "float16", "bfloat16", "float32"), default="auto")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="seconds after which the probe stops, reports what it measured and cleans up (0: none)",
    )
    return parser.parse_args(argv)


class TimeLimitReached(BaseException):
    """Raised by the alarm: a BaseException, so that no step's `except Exception` records it and carries on."""


class TimeLimit:
    """A one-shot alarm. It remembers that it went off: a library that catches everything may turn the exception into
    another one, or swallow it, and the report must still name the time limit as the cause."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.expired = False
        self.message = f"the probe's time limit of {seconds:g} s ran out"

    def start(self):
        signal.signal(signal.SIGALRM, self._stop)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def _stop(self, signum, frame):
        self.expired = True
        raise TimeLimitReached(self.message)

    @staticmethod
    def cancel():
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(argv=None, device_factory=choose_devices):
    args = parse_args(argv)
    # Private and unpredictable: the synthetic checkpoint and every cache a library might write go here.
    workdir = tempfile.mkdtemp(prefix="rocm-fleet-model-")
    os.environ.update(OFFLINE_ENV)
    # One CPU thread unless the caller says otherwise: on a GPU host the CPU only feeds the GPU, and this check runs
    # after every boot on workstations people are using. On a busy CPU OpenMP's spinning threads make bitsandbytes'
    # CPU kernel ten times slower (measured on a shared 2-core machine: 4-bit generation 0.63 s with one thread,
    # 6.5 s with two).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["HF_HOME"] = os.path.join(workdir, "hf-home")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton")

    # Keep the report's channel clean: native libraries and progress bars print to stdout.
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    result = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "pid": os.getpid(),
        "uid": os.getuid(),
        "workdir": workdir,
        "errors": {},
    }
    limit = TimeLimit(args.time_limit) if args.time_limit > 0 else None
    try:
        if limit is not None:
            # Before anything slow, and inside this try: the caller's kill is only the backstop, this way the report
            # is written and the directory removed.
            limit.start()
        run(args, result, workdir, device_factory)
    except BaseException as error:  # noqa: BLE001 — any failure is a finding, never a crash of the probe
        result["errors"]["probe"] = one_line(error)
        result["errors"]["probe (traceback)"] = traceback.format_exc(limit=-6)
    finally:
        TimeLimit.cancel()
        shutil.rmtree(workdir, ignore_errors=True)
    if limit is not None and limit.expired and not result["errors"].get("probe", "").startswith("TimeLimitReached"):
        caught = result["errors"].get("probe")
        result["errors"]["probe"] = f"TimeLimitReached: {limit.message}" + (f" (then {caught})" if caught else "")
    result["wall_s"] = round(time.perf_counter() - wall_start, 3)
    result["cpu_s"] = round(time.process_time() - cpu_start, 3)

    report_out.write(json.dumps(result) + "\n")
    report_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
