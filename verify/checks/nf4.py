"""Check 4 — the NF4 smoke, judged: bitsandbytes' own error bounds, plus lower bounds that catch a no-op quantizer.

The measurement itself happens in the venv (`runtime_probe.py`, on a SHAPE matrix with BLOCKSIZE, run by `runtime.py`'s
probe); this module only compares numbers, so it runs with the host's python3 and is easy to test. Sources of the
bounds:
- bitsandbytes' test_4bit_quant, randn 1024x1024, nf4, blocksize 64: mean |err| < 0.0733, mean relative err < 0.2057;
- its test_matmul_4bit (randn A, xavier-uniform B): mean |out - A @ B.T| < 0.115;
- measured on CPU with torch 2.13.0 / bitsandbytes 0.50.1 (fp32, bf16 and fp16 alike, three seeds): round trip
  mean |err| 0.0728, relative 0.2035-0.2040; matmul_4bit mean |err| 0.0727-0.0730; Linear4bit vs nn.Linear cosine 0.996.
A 4-bit code cannot reproduce a Gaussian matrix much better than that, so an error near zero means the quantizer did
nothing (or was bypassed): the lower bounds sit well under the measured values and far above zero.

The 4-bit matmul paths (the probe's step 5, `judge_paths`): bitsandbytes picks the kernel of an inference matmul by M,
the tokens of the step, so one-token decoding runs a kernel (on a GPU: the fused one) that a 64-row test never
touches. Every case — fp16/bf16 x double quantization x M 1-64 x K 256/288 x matmul_4bit/Linear4bit — must have
- a kernel error under KERNEL_BOUND_UNITS unit roundoffs of the precision it computes in, the error being
  max |out - x @ w_dq.T| / (|x| @ |w_dq|.T) in float32, w_dq = dequantize_4bit(w): a correct kernel's rounding,
  in the units floating-point error analysis bounds it in (bitsandbytes' SIMT kernel: at most about 6);
- a quantization error ||out - x @ w.T|| / ||x @ w.T|| within QUANTIZATION_ERROR (NF4 of Gaussian weights: 0.09;
  a no-op quantizer gives 0, a wrong table or misplaced scales 0.2 and more).
The measurements and the reasoning: docs/verification-gpu-kernels.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verify.checks import runtime
from verify.checks.host import Host
from verify.report.report import FAIL, PASS, CheckResult, Nf4Run
from verify.stack.gpu_arch import base_arch

BROKEN = "the 4-bit kernels are wrong"
NO_OP = "no quantization error at all — the quantizer did nothing"


@dataclass(frozen=True)
class Bound:
    key: str
    label: str
    low: float | None
    high: float | None
    source: str
    below_means: str = NO_OP  # what a value at or under `low` says
    above_means: str = BROKEN  # what a value at or over `high` says

    def judge(self, value: float) -> str | None:
        """None when strictly within bounds, else one line saying which side and what it means."""
        if self.high is not None and not value < self.high:
            return f"{self.label} {value:.4f} ≥ {self.high} ({self.source}): {self.above_means}"
        if self.low is not None and not value > self.low:
            return f"{self.label} {value:.4f} ≤ {self.low} ({self.source}): {self.below_means}"
        return None


BOUNDS = (
    Bound("roundtrip_mean_abs_error", "round-trip mean |err|", 0.06, 0.0733, "bitsandbytes' test_4bit_quant bound"),
    Bound(
        "roundtrip_mean_rel_error", "round-trip mean relative err", 0.15, 0.2057, "bitsandbytes' test_4bit_quant bound"
    ),
    Bound("matmul_mean_abs_error", "matmul_4bit mean |err|", 0.03, 0.115, "bitsandbytes' test_matmul_4bit bound"),
    # Cosine: below 0.99 the layer is broken; at (almost) exactly 1 its weight was never quantized.
    Bound(
        "linear4bit_cosine",
        "Linear4bit vs float layer cosine",
        0.99,
        0.9995,
        "measured 0.996 on CPU",
        below_means=BROKEN,
        above_means="identical to the float layer — its weight was never quantized",
    ),
)


# --- the 4-bit matmul paths: the probe's matrix (runtime_probe.py holds the same numbers; a test keeps them equal) --

PATH_DTYPES = ("float16", "bfloat16")
PATH_DOUBLE_QUANT = (False, True)
PATH_ROWS = (1, 2, 3, 4, 5, 8, 9, 16, 64)
PATH_INNER = (256, 288)
PATH_APIS = ("matmul_4bit", "Linear4bit")
EXPECTED_CASES = frozenset(itertools.product(PATH_APIS, PATH_DTYPES, PATH_DOUBLE_QUANT, PATH_INNER, PATH_ROWS))
GROUPS = len(PATH_APIS) * len(PATH_DTYPES) * len(PATH_DOUBLE_QUANT) * len(PATH_INNER)

UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
KERNEL_BOUND_UNITS = 8
QUANTIZATION_ERROR = (0.04, 0.15)  # relative to the float weight's product; measured 0.078-0.099

FUSED = "fused"
CPU_PACKED = "cpu-packed"
PATH_LABELS = {
    FUSED: "fused kernel",
    CPU_PACKED: "packed AVX512-BF16 kernel",
    "cpu-gemm_4bit": "a CPU gemm_4bit kernel",
    "dequantize+linear": "dequantize+linear",
    "unknown": "path unknown",
}
SHORT_DTYPES = {"float16": "fp16", "bfloat16": "bf16"}


def kernel_bound(case: Mapping[str, Any]) -> float:
    """The bound on one case's kernel error: KERNEL_BOUND_UNITS unit roundoffs of the precision its path computes in
    (bitsandbytes' packed CPU kernel converts fp16 to bf16 and back)."""
    computes_in = "bfloat16" if case.get("path") == CPU_PACKED else case.get("dtype")
    return KERNEL_BOUND_UNITS * UNIT_ROUNDOFF.get(computes_in, UNIT_ROUNDOFF["bfloat16"])


def _key(case: Mapping[str, Any]) -> tuple:
    return (case.get("api"), case.get("dtype"), case.get("double_quant"), case.get("k"), case.get("m"))


def _rows_text(rows: Iterable[int]) -> str:
    """M values as runs of PATH_ROWS: (1, 2, 3, 4, 5, 8) -> "1–8", (1, 64) -> "1, 64"."""
    wanted = sorted(set(rows))
    order = [m for m in PATH_ROWS if m in wanted] + [m for m in wanted if m not in PATH_ROWS]
    runs: list[list[int]] = []
    for m in order:
        if (
            runs
            and m in PATH_ROWS
            and runs[-1][-1] in PATH_ROWS
            and PATH_ROWS.index(m) == PATH_ROWS.index(runs[-1][-1]) + 1
        ):
            runs[-1].append(m)
        else:
            runs.append([m])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _values(cases: list[Mapping[str, Any]], field: str, everything: tuple, text) -> str | None:
    """What `cases` share in `field`, when it is not every value the matrix has (None: all of them)."""
    found = {c.get(field) for c in cases}
    if found >= set(everything):
        return None
    return "+".join(text(v) for v in everything if v in found) or "?"


def describe_cases(cases: list[Mapping[str, Any]]) -> str:
    """Where a set of cases lies in the matrix: "M 1–8, bf16, double quant, fused kernel" — a dimension they span
    entirely is left out."""
    parts = [f"M {_rows_text(c.get('m') for c in cases)}"]
    for field, everything, text in (
        ("dtype", PATH_DTYPES, lambda v: SHORT_DTYPES.get(v, str(v))),
        ("double_quant", PATH_DOUBLE_QUANT, lambda v: "double quant" if v else "no double quant"),
        ("k", PATH_INNER, lambda v: f"K {v}"),
        ("api", PATH_APIS, str),
    ):
        shared = _values(cases, field, everything, text)
        if shared:
            parts.append(shared)
    paths = sorted({c.get("path") for c in cases}, key=str)
    parts.append("+".join(PATH_LABELS.get(p, str(p)) for p in paths))
    return ", ".join(parts)


def case_label(case: Mapping[str, Any]) -> str:
    dq = " double quant" if case.get("double_quant") else ""
    path = PATH_LABELS.get(case.get("path"), str(case.get("path")))
    return (
        f"{case.get('api')} {SHORT_DTYPES.get(case.get('dtype'), case.get('dtype'))}{dq} "
        f"M={case.get('m')} K={case.get('k')} ({path})"
    )


def judge_paths(paths: Mapping[str, Any]) -> list[str]:
    """The problems of the probe's matrix of 4-bit matmuls (none: every path computes what it must)."""
    problems: list[str] = []
    cases = [c for c in paths.get("cases") or [] if isinstance(c, Mapping)]
    errors = paths.get("errors") or {}
    if errors:
        step, message = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        problems.append(f"4-bit matmul {step} raised: {message}{more}")
    missing = EXPECTED_CASES - {_key(c) for c in cases}
    if missing and not errors:
        problems.append(f"{len(missing)} of {len(EXPECTED_CASES)} 4-bit matmuls were not measured")
    garbage = [c for c in cases if c.get("kernel_error") is None or c.get("quantization_error") is None]
    if garbage:
        problems.append(f"NaN or inf from {len(garbage)} 4-bit matmuls ({describe_cases(garbage)}): {BROKEN}")
    finite = [c for c in cases if c not in garbage]
    over = [c for c in finite if not float(c["kernel_error"]) < kernel_bound(c)]
    if over:
        worst = max(over, key=lambda c: float(c["kernel_error"]) / kernel_bound(c))
        problems.append(
            f"kernel error over its bound in {len(over)} of {len(cases)} 4-bit matmuls ({describe_cases(over)}): "
            f"worst {float(worst['kernel_error']):.3g} ≥ {kernel_bound(worst):.3g} at {case_label(worst)} — "
            "the kernel does not compute x @ dequantize_4bit(w).T"
        )
    low, high = QUANTIZATION_ERROR
    wrong = [c for c in finite if not float(c["quantization_error"]) < high]
    if wrong:
        worst = max(wrong, key=lambda c: float(c["quantization_error"]))
        problems.append(
            f"quantization error ≥ {high} in {len(wrong)} 4-bit matmuls ({describe_cases(wrong)}): worst "
            f"{float(worst['quantization_error']):.3f} at {case_label(worst)} (NF4 gives about 0.09): {BROKEN}"
        )
    none = [c for c in finite if not float(c["quantization_error"]) > low]
    if none:
        problems.append(
            f"quantization error ≤ {low} in {len(none)} 4-bit matmuls ({describe_cases(none)}): the weights were "
            "not quantized"
        )
    return problems


def paths_summary(paths: Mapping[str, Any]) -> dict[str, Any]:
    """What the matrix showed, for the reason line and the report's facts."""
    cases = [c for c in paths.get("cases") or [] if isinstance(c, Mapping)]
    by_path: dict[str, list[Mapping[str, Any]]] = {}
    # The paths the matmuls took; when none ran, those the dispatch answered beforehand.
    for case in cases or [c for c in paths.get("planned") or [] if isinstance(c, Mapping)]:
        by_path.setdefault(case.get("path"), []).append(case)
    order = [FUSED, CPU_PACKED, "cpu-gemm_4bit", "dequantize+linear", "unknown"]
    texts = []
    for path in sorted(by_path, key=lambda p: (order.index(p) if p in order else len(order), str(p))):
        found = by_path[path]
        text = f"{PATH_LABELS.get(path, str(path))} M {_rows_text(c.get('m') for c in found)}"
        inner = _values(found, "k", PATH_INNER, lambda v: f"K {v}")
        texts.append(text + (f" ({inner})" if inner else ""))
    finite = [c for c in cases if c.get("kernel_error") is not None]
    worst = max(finite, key=lambda c: float(c["kernel_error"]) / kernel_bound(c), default=None)
    quantization = [float(c["quantization_error"]) for c in cases if c.get("quantization_error") is not None]
    fused = [c.get("m") for c in by_path.get(FUSED, [])]
    return {
        "cases": len(cases),
        "paths": "; ".join(texts),
        "fused_rows": _rows_text(fused) if fused else "",
        "worst": worst,
        "worst_of_bound": float(worst["kernel_error"]) / kernel_bound(worst) if worst else None,
        "quantization": (min(quantization), max(quantization)) if quantization else None,
        "dispatch": paths.get("dispatch") or {},
    }


def _asked(summary: Mapping[str, Any]) -> str:
    """ ", asked of _gemm_4bit_use_custom_rocm on gfx1100", and what could not be asked."""
    dispatch = summary["dispatch"]
    asked = dispatch.get("asked")
    text = f", asked of {asked.rsplit('.', 1)[-1]} on {dispatch.get('arch')}" if asked else ""
    problems = dispatch.get("problems") or []
    return text + (f" ({problems[0]})" if problems else "")


def paths_text(summary: Mapping[str, Any]) -> str:
    """The device's one line: "144 4-bit matmuls (…): paths …; worst kernel error 1.1e-03 (bf16, bound 3.1e-02);
    quantization error …"."""
    worst = summary["worst"]
    low, high = summary["quantization"]
    return (
        f"{summary['cases']} 4-bit matmuls (fp16/bf16 × double quant on/off × M 1–64 × K 256/288 × "
        f"matmul_4bit/Linear4bit): paths {summary['paths']}{_asked(summary)}; worst kernel error "
        f"{float(worst['kernel_error']):.1e} ({SHORT_DTYPES.get(worst.get('dtype'), worst.get('dtype'))}, bound "
        f"{kernel_bound(worst):.1e}); quantization error {low:.3f}–{high:.3f}"
    )


def judge_nf4(measurement: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(within bounds, problems) for one device's measurement from the probe.

    A step that raised is a problem named by its error; a missing number is a problem too (never a silent pass).
    """
    problems: list[str] = []
    errors = measurement.get("errors") or {}
    for bound in BOUNDS:
        value = measurement.get(bound.key)
        if value is None:
            if not errors:
                problems.append(f"{bound.label} was not measured")
            continue
        if value != value:  # NaN
            problems.append(f"{bound.label} is NaN: the kernels produced garbage")
            continue
        problem = bound.judge(float(value))
        if problem:
            problems.append(problem)
    # Bounds first: "the quantizer did nothing" explains the errors that usually follow from it.
    problems.extend(f"{step} raised: {message}" for step, message in errors.items())
    # A probe of this verifier always measures the paths (a run written before it had none: judged as it was).
    if "paths" in measurement:
        problems.extend(judge_paths(measurement.get("paths") or {}))
    return (not problems, problems)


def bounds_evidence() -> list[dict[str, Any]]:
    return [{"measure": b.key, "greater_than": b.low, "less_than": b.high, "source": b.source} for b in BOUNDS]


def check_nf4(probe: Mapping[str, Any]) -> list[CheckResult]:
    """One check per device the probe ran NF4 on (one failure when it ran none)."""
    runs = probe.get("nf4") or []
    if not runs:
        errors = probe.get("errors", {})
        why = "; ".join(f"{k}: {v}" for k, v in errors.items() if "traceback" not in k) or "nothing to run it with"
        return [CheckResult("nf4", "NF4 smoke test", FAIL, f"NF4 smoke not run: {why}", {"errors": errors})]
    devices = {f"cuda:{d['index']}": d for d in ((probe.get("torch") or {}).get("devices") or [])}
    results = []
    for run in runs:
        device = run.get("device", "?")
        ok, problems = judge_nf4(run)
        on_cpu = device == "cpu"
        arch = base_arch(devices.get(device, {}).get("arch")) if not on_cpu else None
        label = f"{device} ({arch})" if arch else device
        evidence = dict(run)
        evidence["bounds"] = bounds_evidence()
        evidence["gpu_pass"] = not on_cpu
        check_id = f"nf4.{device.replace(':', '')}"
        title = f"NF4 smoke on {label}"
        if not ok:
            paths = ""
            if isinstance(run.get("paths"), Mapping):
                summary = paths_summary(run["paths"])
                if summary["paths"]:
                    paths = f" (paths {summary['paths']}{_asked(summary)})"
            results.append(
                CheckResult(check_id, title, FAIL, f"NF4 on {label}: {'; '.join(problems)}{paths}", evidence)
            )
            continue
        total_ms = sum((run.get("timings_ms") or {}).values())
        memory = run.get("gpu_peak_memory_bytes")
        memory_text = f", {memory / 2**20:.1f} MiB GPU memory" if memory is not None else ""
        cpu_note = " — CPU run, not a GPU pass" if on_cpu else ""
        matrix = ""
        if "paths" in run:
            summary = paths_summary(run["paths"])
            evidence["paths_summary"] = {k: v for k, v in summary.items() if k not in ("worst", "dispatch")}
            evidence["kernel_bounds"] = {dtype: KERNEL_BOUND_UNITS * UNIT_ROUNDOFF[dtype] for dtype in PATH_DTYPES}
            matrix = paths_text(summary) + "; "
            total_ms += float(run["paths"].get("ms") or 0.0)
        results.append(
            CheckResult(
                check_id,
                title,
                PASS,
                f"NF4 on {label}: {matrix}round-trip |err| {run['roundtrip_mean_abs_error']:.4f}, "
                f"matmul_4bit |err| {run['matmul_mean_abs_error']:.4f}, "
                f"Linear4bit cosine {run['linear4bit_cosine']:.4f}, "
                f"{total_ms:.0f} ms{memory_text}{cpu_note}",
                evidence,
            )
        )
    return results


def run(host: Host) -> list[CheckResult]:
    return host.shared(_results)


def _results(host: Host) -> list[CheckResult]:
    """This run's NF4 checks, judged once: the model check (verify/checks/model.py) runs where they passed."""
    found = runtime.probe(host)
    if found is None or found.data is None:
        return []  # --static-only, or the probe died: runtime.torch says so
    return check_nf4(found.data)


def passed_devices(host: Host) -> list[str]:
    """The devices ("cuda:0", "cpu") NF4 passed on in this run."""
    return [r.evidence["device"] for r in run(host) if r.status == PASS and r.evidence.get("device")]


def facts(host: Host, results: list[CheckResult]) -> dict:
    return {
        "nf4": tuple(
            Nf4Run(
                r.evidence.get("device"),
                r.status,
                r.evidence.get("roundtrip_mean_abs_error"),
                bool(r.evidence.get("gpu_pass")),
                *_path_facts(r.evidence.get("paths")),
            )
            for r in results
            if r.id.startswith("nf4.") and r.evidence
        )
    }


def _path_facts(paths: Mapping[str, Any] | None) -> tuple[str | None, float | None]:
    """(the M values the fused kernel ran at — "" for none —, the worst kernel error as a share of its bound), or
    (None, None) when the paths were not measured."""
    if not isinstance(paths, Mapping) or not paths.get("cases"):
        return None, None
    summary = paths_summary(paths)
    return summary["fused_rows"], summary["worst_of_bound"]
