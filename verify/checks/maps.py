"""Check 3, second half — the static prediction against what the running process really mapped (/proc/self/maps).

The prediction is made for the loads the probe really did (torch's dlopens, then the bitsandbytes library it really
loaded, if any), with the probe's own LD_LIBRARY_PATH, so any difference means the model and the loader disagree
on this host. Files are compared by their canonical path and, failing that, by (device, inode).

- predicted but not mapped: the loader took another file (or none) → fail;
- a ROCm library mapped but not predicted: from torch/lib or the expected /opt/rocm-X.Y.Z it is something the
  runtime opened lazily (the HSA runtime dlopens its tools libraries) → warn, listed; from anywhere else → fail.
Non-ROCm extras (Python's own extension modules, numpy's libraries) are not part of the model and are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from verify.checks import linkage, runtime
from verify.checks.host import Host
from verify.checks.linkage import Places
from verify.ld.image import ProcessImage
from verify.report.report import ELSEWHERE, FAIL, PASS, SKIP, WARN, CheckResult
from verify.stack.rocm_libraries import is_rocm_library

TITLE = "mapped libraries match the static prediction"


def _dev_inode(entry: Mapping[str, Any]) -> tuple[int, int] | None:
    """/proc/PID/maps writes the device as hex "major:minor"."""
    try:
        major, minor = (int(part, 16) for part in str(entry["dev"]).split(":"))
        return (os.makedev(major, minor), int(entry["inode"]))
    except (KeyError, ValueError):
        return None


def _stat_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def compare_maps(
    image: ProcessImage,
    mapped: Iterable[Mapping[str, Any]],
    places: Places,
    *,
    realpath: Callable[[str], str] = os.path.realpath,
    stat_key: Callable[[str], tuple[int, int] | None] = _stat_key,
    lazily_mapped: Iterable[Mapping[str, Any]] = (),
) -> CheckResult:
    """`mapped` is the probe's maps_after_import; `lazily_mapped` its maps after NF4 (reported, not judged)."""
    mapped = list(mapped)
    mapped_paths = {realpath(m["path"]): m for m in mapped}
    mapped_keys = {key for key in (_dev_inode(m) for m in mapped) if key}

    predicted: dict[str, str] = {}
    for obj in image.objects:
        predicted.setdefault(realpath(obj.path), obj.requested_as)

    not_mapped = []
    for canonical, name in predicted.items():
        if canonical in mapped_paths:
            continue
        key = stat_key(canonical)
        if key and key in mapped_keys:
            continue
        not_mapped.append(f"{name} → {canonical}")

    predicted_keys = {key for key in (stat_key(p) for p in predicted) if key}
    unexpected, lazy_ok = [], []
    for canonical, entry in mapped_paths.items():
        if canonical in predicted or not is_rocm_library(canonical):
            continue
        if _dev_inode(entry) in predicted_keys:
            continue
        if places.origin(canonical) == ELSEWHERE:
            unexpected.append(canonical)
        else:
            lazy_ok.append(canonical)

    after = sorted(
        realpath(m["path"])
        for m in lazily_mapped
        if is_rocm_library(m["path"]) and realpath(m["path"]) not in mapped_paths
    )
    evidence = {
        "predicted": len(predicted),
        "mapped": len(mapped_paths),
        "predicted_not_mapped": not_mapped,
        "rocm_mapped_not_predicted": unexpected + lazy_ok,
        "rocm_mapped_later_by_nf4": after,
        "rocm_mapped": sorted(p for p in mapped_paths if is_rocm_library(p)),
    }
    if not_mapped or unexpected:
        parts = []
        if not_mapped:
            parts.append(f"predicted but not mapped: {', '.join(not_mapped[:3])}{' …' if len(not_mapped) > 3 else ''}")
        if unexpected:
            parts.append(
                f"mapped but neither predicted nor from torch/lib or /opt/rocm-{places.release}: "
                f"{', '.join(unexpected[:3])}{' …' if len(unexpected) > 3 else ''}"
            )
        return CheckResult("runtime.maps", TITLE, FAIL, "; ".join(parts), evidence)
    if lazy_ok:
        return CheckResult(
            "runtime.maps",
            TITLE,
            WARN,
            f"all {len(predicted)} predicted objects mapped; {len(lazy_ok)} ROCm libraries opened at run time that the "
            f"static model does not predict: {', '.join(os.path.basename(p) for p in lazy_ok[:4])}",
            evidence,
        )
    return CheckResult(
        "runtime.maps",
        TITLE,
        PASS,
        f"all {len(predicted)} predicted objects mapped at the predicted paths; "
        f"{len(evidence['rocm_mapped'])} ROCm libraries mapped, none unpredicted",
        evidence,
    )


def run(host: Host) -> list[CheckResult]:
    """Predict the loads the probe really did, with its environment, and compare with its /proc/self/maps."""
    found = runtime.probe(host)
    if found is None or found.data is None:
        return []  # --static-only, or the probe died: runtime.torch says so
    options, data = host.options, found.data
    torch_dlopens = linkage.inputs(host).torch_dlopens
    mapped = data.get("maps_after_import")
    if not mapped or not torch_dlopens:
        return [CheckResult("runtime.maps", TITLE, SKIP, "nothing to compare: the probe mapped no torch", {})]
    bnb_file = (data.get("bitsandbytes") or {}).get("library_file")
    dlopens = list(torch_dlopens) + ([bnb_file] if bnb_file else [])
    environ = dict(options.environ)
    probe_env = data.get("env", {})
    if "LD_LIBRARY_PATH" in probe_env:
        environ["LD_LIBRARY_PATH"] = probe_env["LD_LIBRARY_PATH"]
    image = linkage.resolve(host, data.get("executable") or str(options.venv / "bin" / "python"), dlopens, environ)
    places = Places.of_venv(host.view.image_path(host.venv.site_packages), options.expect_rocm, host.view)
    result = compare_maps(
        image, mapped, places, realpath=host.view.real_path, lazily_mapped=data.get("maps_after_nf4") or ()
    )
    return [CheckResult(result.id, result.title, result.status, result.reason, dict(result.evidence, dlopens=dlopens))]


def facts(host: Host, results: list[CheckResult]) -> dict:
    return {}  # the summary shows no column of its own for it: its status is among the checks
