"""The host's results as Prometheus metrics, in a file for node_exporter's textfile collector (`rocm_fleet.prom`).

The file is made from every result the host keeps (kept_files.KEPT: the verification's, the apt hook's, the boot
check's), each series labelled with its `source`, so whichever of them ran last rewrites the whole file and no source's
series is lost. `write_metrics(directory)` is what each of them calls after keeping its own result: `verify check
--metrics-dir`, the apt hook (`--metrics-dir`), and the boot check. Per source:

    rocm_fleet_result_usable{source}                 1, or 0 when the kept file cannot be used (then nothing else)
    rocm_fleet_last_run_timestamp_seconds{source}    when it ran (Unix time)
    rocm_fleet_passed{source}                        1 when its report passed (verdict pass or warn), else 0
    rocm_fleet_verdict{source,verdict}               1 for its verdict, 0 for the others (pass, warn, fail)
    rocm_fleet_check_status{source,check,status}     1 for each check's status, 0 for the others
    rocm_fleet_stray_packages{source}                stray distro ROCm packages (when checked)
    rocm_fleet_gpus{source}, rocm_fleet_gpu_info{source,index,arch,supported}    the GPUs the probe saw
    rocm_fleet_nf4_roundtrip_mean_abs_error{source,device}                        the NF4 smoke's error
    rocm_fleet_reboot_pending{source}                1 when a reboot is pending (facts.kernel, schema 2)
    rocm_fleet_kernel_has_amdgpu{source,kernel,boot} 1 when that kernel has amdgpu.ko; boot="running" | "next"
    rocm_fleet_verifier_info{source,version}         the verifier version that wrote it

The file is written atomically (kept_files.replace_file) and only into a directory that exists: node_exporter's
package creates it (Debian: /var/lib/prometheus/node-exporter); a host without it gets no file and no error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from verify.report.kept import KeptResult, Unusable, kept_results
from verify.report.kept_files import STATE_ROOT, read_kept_files, replace_file
from verify.report.report import FAIL, PASS, SKIP, WARN

FILE_NAME = "rocm_fleet.prom"
DEFAULT_DIR = "/var/lib/prometheus/node-exporter"  # Debian's prometheus-node-exporter reads *.prom here
VERDICTS = (PASS, WARN, FAIL)
STATUSES = (PASS, WARN, FAIL, SKIP)

_HELP = {
    "rocm_fleet_result_usable": "1 when the result this source kept on the host can be read as a report, else 0.",
    "rocm_fleet_last_run_timestamp_seconds": "When the source last ran, as Unix time.",
    "rocm_fleet_passed": "1 when the source's last report passed (verdict pass or warn), else 0.",
    "rocm_fleet_verdict": "The verdict of the source's last report: 1 for it, 0 for the others.",
    "rocm_fleet_check_status": "Each check's status in the source's last report: 1 for it, 0 for the others.",
    "rocm_fleet_stray_packages": "Stray distro-archive ROCm packages installed at the source's last run.",
    "rocm_fleet_gpus": "GPUs the runtime probe saw at the source's last run.",
    "rocm_fleet_gpu_info": "One series per GPU the runtime probe saw: its index, arch and whether ROCm supports it.",
    "rocm_fleet_nf4_roundtrip_mean_abs_error": "Mean absolute error of the NF4 quantize/dequantize round trip.",
    "rocm_fleet_reboot_pending": "1 when a reboot was pending at the source's last run (the next boot runs another "
    "kernel), else 0.",
    "rocm_fleet_kernel_has_amdgpu": "1 when the kernel that runs (boot=running) or boots next (boot=next) has "
    "amdgpu.ko, else 0.",
    "rocm_fleet_verifier_info": "The version of the verifier that wrote the source's last result.",
}


def _label(value: object) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _samples(result: KeptResult) -> Iterable[tuple[str, dict, float]]:
    report, source = result.report, {"source": result.source}
    yield "rocm_fleet_result_usable", source, 1
    if result.timestamp is not None:
        yield "rocm_fleet_last_run_timestamp_seconds", source, result.timestamp
    yield "rocm_fleet_passed", source, 1 if report.passed else 0
    for verdict in VERDICTS:
        yield "rocm_fleet_verdict", {**source, "verdict": verdict}, 1 if report.verdict == verdict else 0
    for check in report.checks:
        for status in STATUSES:
            yield (
                "rocm_fleet_check_status",
                {**source, "check": check.id, "status": status},
                1 if check.status == status else 0,
            )
    facts = report.facts
    if facts.strays is not None and isinstance(facts.strays.count, int):
        yield "rocm_fleet_stray_packages", source, facts.strays.count
    if facts.gpus is not None:
        yield "rocm_fleet_gpus", source, len(facts.gpus)
        for gpu in facts.gpus:
            yield (
                "rocm_fleet_gpu_info",
                {
                    **source,
                    "index": gpu.index,
                    "arch": gpu.arch or "unknown",
                    "supported": "true" if gpu.supported else "false",
                },
                1,
            )
    for run in facts.nf4:
        error = run.roundtrip_mean_abs_error
        if isinstance(error, (int, float)) and not isinstance(error, bool):
            yield "rocm_fleet_nf4_roundtrip_mean_abs_error", {**source, "device": run.device}, error
    kernel = facts.kernel
    if kernel is not None:  # schema 2: the kernel side of the GPU (check kernel.*)
        yield "rocm_fleet_reboot_pending", source, 1 if kernel.reboot_pending else 0
        for boot, release, has in (
            ("running", kernel.running, kernel.running_has_amdgpu),
            ("next", kernel.next_boot, kernel.next_boot_has_amdgpu),
        ):
            if release and has is not None:
                yield "rocm_fleet_kernel_has_amdgpu", {**source, "kernel": release, "boot": boot}, 1 if has else 0
    yield "rocm_fleet_verifier_info", {**source, "version": report.tool_version}, 1


def render_metrics(results: dict[str, KeptResult], unusable: Iterable[Unusable] = ()) -> str:
    """The textfile collector's file for these results (pure)."""
    families: dict[str, list[tuple[dict, float]]] = {name: [] for name in _HELP}
    for item in unusable:
        families["rocm_fleet_result_usable"].append(({"source": item.source}, 0))
    for source in sorted(results):
        for name, labels, value in _samples(results[source]):
            families[name].append((labels, value))
    lines = []
    for name, samples in families.items():
        if not samples:
            continue
        lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge"]
        for labels, value in samples:
            text = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
            lines.append(f"{name}{{{text}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def write_metrics(directory: str | os.PathLike, root: str | os.PathLike = STATE_ROOT) -> str | None:
    """Rewrite directory/rocm_fleet.prom from every result kept under `root`; its path, or None when `directory`
    does not exist (no node_exporter on this host). OSError when it cannot be written."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return None
    results, unusable, _ = kept_results(read_kept_files(os.fspath(root)))
    return replace_file(directory, FILE_NAME, render_metrics(results, unusable))
