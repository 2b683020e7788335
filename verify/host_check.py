"""Every check for one host, in order, into one report: `python -m verify check`'s engine.

1. static linkage of python → torch → bitsandbytes' library (`linkage_check`), before anything is imported;
2. installed versions (`installed`); stray distro ROCm packages (`verify.strays`);
3. runtime in the venv and 4. NF4 (`runtime_check`), then the maps-vs-prediction comparison (`maps_compare`).
The static part reads files only (through verify/safe_read.py), within `CheckOptions.static_time_limit`: running out
of time is a failing check, not a hang. The runtime part starts the venv's python once — unless the static part ran
out of time or found a library that is not a regular file (a FIFO would block the probe's dlopen for ever).
"""

from __future__ import annotations

import os
import platform
import posixpath
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from verify.bnb_library import BnbChoice, release_tag, select_bnb_library
from verify.dpkg import DpkgDatabaseError, DpkgPackage, read_status
from verify.elf import ElfError
from verify.gpu_arch import arch_supported, base_arch
from verify.image import ProcessImage
from verify.installed import check_bitsandbytes_version, check_system_rocm, check_torch_build, rocm_info_version
from verify.linkage_check import Places, judge_linkage
from verify.maps_compare import compare_maps
from verify.report import FAIL, PASS, SKIP, STATIC_CHECK_IDS, WARN, CheckResult, build_report
from verify.runtime_check import ProbeRun, RuntimeExpectations, judge_runtime, run_probe
from verify.safe_read import OutOfTime, read_text, time_limit
from verify.strays import find_strays
from verify.torch_loads import torch_import_dlopens
from verify.venv_layout import Venv, dist_version, find_venv, host_realpath, torch_version_module, under_root

TOOL_VERSION = "0.1.0"
STATIC_TIME_LIMIT = 30.0  # seconds; the static part takes well under one on a workstation (README: 0.09 s)


@dataclass(frozen=True)
class CheckOptions:
    venv: Path
    expect_rocm: str
    expect_bitsandbytes: str = "0.50.1"
    device: str = "auto"  # "auto" | "cpu"
    gpu_required: bool = True
    static_only: bool = False
    root: Path = Path("/")
    timeout: float = 900.0
    static_time_limit: float | None = STATIC_TIME_LIMIT  # None: no limit
    torch_label: str | None = None  # display only: what this torch stands for (test fleets)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def resolve(executable: str, dlopens: list[str], root: Path, environ: Mapping[str, str]) -> ProcessImage:
    """The process model from the linkage analyser (imported here so the rest of this module does not need it)."""
    from verify.process import resolve_process

    return resolve_process(executable, dlopens, env=environ, root=str(root))


def host_facts(root: Path) -> dict[str, Any]:
    pretty = None
    try:
        text = read_text(under_root(root, "/etc/os-release"), 64 << 10, errors="replace", follow=root == Path("/"))
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "os": pretty,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def _python_tag(venv: Venv) -> str | None:
    name = venv.site_packages.parent.name  # "python3.11"
    return name.replace("python", "").replace(".", "") if name.startswith("python") else None


def _strays(
    root: Path, packages: tuple[DpkgPackage, ...] | None
) -> tuple[CheckResult, dict[str, str], dict[str, Any] | None]:
    """(check, {canonical library path: "package version (distro)"}, facts) from the strays module."""
    try:
        report = find_strays(root, packages)
    except (OSError, ValueError) as error:
        check = CheckResult(
            "strays", "stray distro ROCm packages", WARN, f"could not read the dpkg database: {error}", {}
        )
        return check, {}, None
    owners = {}
    for stray in report.strays:
        for library in stray.libraries:
            owners[host_realpath(library.path, root)] = f"{stray.package} {stray.version} (distro)"
    risky = [s.package for s in report.binding_risk]
    facts = {"count": len(report.strays), "packages": [s.package for s in report.strays], "binding_risk": risky}
    evidence = report.to_json()
    title = "stray distro ROCm packages"
    if not report.strays:
        return CheckResult("strays", title, PASS, "no distro-archive ROCm packages installed", evidence), owners, facts
    first = report.binding_risk[0] if report.binding_risk else report.strays[0]
    more = f" (+{len(report.strays) - 1} more)" if len(report.strays) > 1 else ""
    reason = f"{len(report.strays)} distro ROCm package(s): {first.describe()}{more}"
    return CheckResult("strays", title, WARN, reason, evidence), owners, facts


def _static_linkage(
    options: CheckOptions, venv: Venv, owners: Mapping[str, str]
) -> tuple[CheckResult, BnbChoice | None, list[str]]:
    title = "static linkage: python → torch → bitsandbytes"
    constants = torch_version_module(venv.site_packages)
    bnb_dir = venv.site_packages / "bitsandbytes"
    if not bnb_dir.is_dir():
        return (
            CheckResult("linkage.static", title, FAIL,
                        f"bitsandbytes is not installed in {options.venv} — pip install bitsandbytes=={options.expect_bitsandbytes}", {}),
            None, [],
        )
    choice = select_bnb_library(bnb_dir, constants.get("hip"), options.environ, options.expect_rocm)
    loads = torch_import_dlopens(venv.site_packages, _python_tag(venv))
    host_site = _host_path(options.root, venv.site_packages)
    torch_dlopens = [_host_path(options.root, p) for p in loads.dlopens]
    bnb_host = _host_path(options.root, choice.path)
    evidence_choice = {"library": choice.name, "rule": choice.rule, "warning": choice.warning, "error": choice.error}
    if choice.error:
        return (
            CheckResult("linkage.static", title, FAIL,
                        f"bitsandbytes would load no ROCm library: {choice.error}", {"bnb_choice": evidence_choice}),
            choice, torch_dlopens,
        )
    if not choice.path.exists():
        return (
            CheckResult("linkage.static", title, FAIL,
                        f"bitsandbytes would fail with 'No compatible ROCm binary found at {bnb_host}' ({choice.rule}) "
                        f"— install torch for ROCm {options.expect_rocm} and bitsandbytes=={options.expect_bitsandbytes}",
                        {"bnb_choice": evidence_choice}),
            choice, torch_dlopens,
        )
    executable = str(options.venv / "bin" / "python")
    try:
        image = resolve(executable, [*torch_dlopens, bnb_host], options.root, options.environ)
    except (ElfError, OSError) as error:
        return (
            CheckResult("linkage.static", title, FAIL,
                        f"cannot analyse {executable}: {error} — recreate the venv", {"bnb_choice": evidence_choice}),
            choice, torch_dlopens,
        )
    notes = list(loads.notes)
    if choice.warning:
        notes.append(choice.warning)
    if options.environ.get("LD_PRELOAD"):
        notes.append(f"LD_PRELOAD={options.environ['LD_PRELOAD']!r} is set: preloaded objects are not modelled")
    result = judge_linkage(
        image, bnb_library=bnb_host, site_packages=host_site, release=options.expect_rocm, root=options.root,
        owners=owners, notes=notes,
    )
    evidence = dict(result.evidence, bnb_choice=evidence_choice, torch_dlopens=torch_dlopens)
    unsafe = _not_regular_files([finding.path for finding in image.findings], options.root)
    if unsafe:
        evidence["not_regular_files"] = unsafe
    return CheckResult(result.id, result.title, result.status, result.reason, evidence), choice, torch_dlopens


def _not_regular_files(paths: list[str], root: Path) -> list[str]:
    """Which of these paths (the files the analysis could not use) exist but are not regular files: the runtime probe
    would dlopen them, and a FIFO blocks that for ever."""
    found = []
    for path in dict.fromkeys(paths):
        try:
            mode = os.stat(under_root(root, path)).st_mode
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(mode):
            found.append(path)
    return found


def _static_part(options: CheckOptions, venv: Venv) -> tuple[list[CheckResult], BnbChoice | None, list[str], Any]:
    """The static checks (files only): (checks, bitsandbytes' library choice, what `import torch` dlopens, the strays
    facts)."""
    try:
        # Parsed once for the strays check and the system ROCm check (the apt hook runs this after every dpkg run).
        packages = read_status(options.root)
    except DpkgDatabaseError:
        packages = None  # each check reads it itself and says why it cannot
    strays_check, owners, strays_facts = _strays(options.root, packages)
    linkage, choice, torch_dlopens = _static_linkage(options, venv, owners)
    checks = [
        linkage,
        check_system_rocm(options.root, options.expect_rocm, packages),
        check_torch_build(venv, options.expect_rocm),
        check_bitsandbytes_version(venv, options.expect_bitsandbytes),
        strays_check,
    ]
    return checks, choice, torch_dlopens, strays_facts


def _out_of_time(late: OutOfTime) -> list[CheckResult]:
    reason = (f"the static check did not finish: {late} — a workstation's files take well under a second; look at "
              "what it stopped at (a hung mount, a flood of files)")
    return [CheckResult(check_id, check_id, FAIL, reason, {"stopped_before": late.doing})
            for check_id in STATIC_CHECK_IDS]


def _runtime_blocked(checks: list[CheckResult]) -> str | None:
    """Why the runtime probe must not start after this static part, or None."""
    linkage = next((c for c in checks if c.id == "linkage.static"), None)
    unsafe = linkage.evidence.get("not_regular_files") if linkage else None
    if unsafe:
        return (f"{', '.join(unsafe)}: not a regular file where the process would load a library (a FIFO would block "
                "the probe for ever) — remove it and reinstall what owns that path")
    return None


def _host_path(root: Path, path: Path | str) -> str:
    path = Path(path)
    if root == Path("/"):
        return str(path)
    return "/" + str(path.relative_to(root))


def _maps_check(options: CheckOptions, probe: ProbeRun, torch_dlopens: list[str], venv: Venv) -> CheckResult:
    """Predict the loads the probe really did, with its environment, and compare with its /proc/self/maps."""
    data = probe.data or {}
    mapped = data.get("maps_after_import")
    title = "mapped libraries match the static prediction"
    if not mapped or not torch_dlopens:
        return CheckResult("runtime.maps", title, SKIP, "nothing to compare: the probe mapped no torch", {})
    bnb_file = (data.get("bitsandbytes") or {}).get("library_file")
    dlopens = list(torch_dlopens) + ([bnb_file] if bnb_file else [])
    environ = dict(options.environ)
    probe_env = data.get("env", {})
    if "LD_LIBRARY_PATH" in probe_env:
        environ["LD_LIBRARY_PATH"] = probe_env["LD_LIBRARY_PATH"]
    image = resolve(data.get("executable") or str(options.venv / "bin" / "python"), dlopens, Path("/"), environ)
    places = Places.of_venv(str(venv.site_packages), options.expect_rocm)
    result = compare_maps(image, mapped, places, lazily_mapped=data.get("maps_after_nf4") or ())
    return CheckResult(result.id, result.title, result.status, result.reason,
                       dict(result.evidence, dlopens=dlopens))


def run_checks(options: CheckOptions) -> dict[str, Any]:
    """Every check; returns the report dict. Raises venv_layout.VenvError for a --venv that is not a venv."""
    venv = find_venv(options.venv, options.root)
    try:
        with time_limit(options.static_time_limit):
            checks, choice, torch_dlopens, strays_facts = _static_part(options, venv)
        blocked = _runtime_blocked(checks)
    except OutOfTime as late:
        checks, choice, torch_dlopens, strays_facts = _out_of_time(late), None, [], None
        blocked = f"the static check did not finish ({late})"
    if blocked and not options.static_only:
        checks.append(CheckResult("runtime.torch", "the runtime probe ran in the venv", FAIL,
                                  f"runtime probe not run: {blocked}", {}))

    probe = None
    if not options.static_only and not blocked:
        want = RuntimeExpectations(
            release=options.expect_rocm,
            device=options.device,
            gpu_required=options.gpu_required,
            expected_bnb_library=f"libbitsandbytes_rocm{release_tag(options.expect_rocm)}.so",
        )
        probe = run_probe(venv.python, options.device, env=options.environ, timeout=options.timeout)
        runtime = judge_runtime(probe, want)
        checks.extend(runtime[:3])
        if probe.data is not None:
            checks.append(_maps_check(options, probe, torch_dlopens, venv))
        checks.extend(runtime[3:])

    facts = _facts(options, venv, checks, choice, probe, strays_facts)
    request = {
        "venv": str(options.venv),
        "expect_rocm": options.expect_rocm,
        "expect_bitsandbytes": options.expect_bitsandbytes,
        "device": options.device,
        "gpu_required": options.gpu_required,
        "static_only": options.static_only,
        "root": str(options.root),
        "torch_label": options.torch_label,
    }
    return build_report(
        host=host_facts(options.root),
        request=request,
        facts=facts,
        checks=checks,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        tool_version=TOOL_VERSION,
    )


def _facts(
    options: CheckOptions,
    venv: Venv,
    checks: list[CheckResult],
    choice: BnbChoice | None,
    probe: ProbeRun | None,
    strays: dict[str, Any] | None,
) -> dict[str, Any]:
    by_id = {c.id: c for c in checks}
    data = (probe.data if probe else None) or {}
    torch_rt = data.get("torch") or {}
    constants = torch_version_module(venv.site_packages)
    bnb_rt = data.get("bitsandbytes") or {}
    gpus = None
    if probe is not None:
        gpus = [
            {"index": d.get("index"), "name": d.get("name"), "arch": base_arch(d.get("arch")),
             "supported": arch_supported(d.get("arch"))}
            for d in torch_rt.get("devices") or []
        ]
    nf4 = []
    for check in checks:
        if check.id.startswith("nf4.") and check.evidence:
            nf4.append({
                "device": check.evidence.get("device"),
                "status": check.status,
                "roundtrip_mean_abs_error": check.evidence.get("roundtrip_mean_abs_error"),
                "gpu_pass": bool(check.evidence.get("gpu_pass")),
            })
    if probe is None:
        mode = "none"
    elif options.device == "cpu" or not (torch_rt.get("devices")):
        mode = "cpu"
    else:
        mode = "gpu"
    linkage = by_id.get("linkage.static")
    return {
        "rocm": rocm_info_version(options.root),
        "torch": dist_version(venv.site_packages, "torch"),
        "torch_hip": constants.get("hip"),
        "bitsandbytes": dist_version(venv.site_packages, "bitsandbytes"),
        "bnb_library": posixpath.basename(bnb_rt.get("library_file") or "") or (choice.name if choice else None),
        "gpus": gpus,
        "device_mode": mode,
        "linkage": (
            {"status": linkage.status, "reason": linkage.reason, "short": linkage.evidence.get("short")}
            if linkage else None
        ),
        "strays": strays,
        "nf4": nf4,
    }
