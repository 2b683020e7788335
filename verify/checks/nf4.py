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
"""

from __future__ import annotations

from collections.abc import Mapping
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
            results.append(CheckResult(check_id, title, FAIL, f"NF4 on {label}: {'; '.join(problems)}", evidence))
            continue
        total_ms = sum((run.get("timings_ms") or {}).values())
        memory = run.get("gpu_peak_memory_bytes")
        memory_text = f", {memory / 2**20:.1f} MiB GPU memory" if memory is not None else ""
        cpu_note = " — CPU run, not a GPU pass" if on_cpu else ""
        results.append(
            CheckResult(
                check_id,
                title,
                PASS,
                f"NF4 on {label}: round-trip |err| {run['roundtrip_mean_abs_error']:.4f}, "
                f"matmul_4bit |err| {run['matmul_mean_abs_error']:.4f}, Linear4bit cosine "
                f"{run['linear4bit_cosine']:.4f}, {total_ms:.0f} ms{memory_text}{cpu_note}",
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
            )
            for r in results
            if r.id.startswith("nf4.") and r.evidence
        )
    }
