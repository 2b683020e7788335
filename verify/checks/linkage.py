"""Check 1 — static linkage of the Python process, before anything is imported: python → torch → bitsandbytes.

The process model (`ProcessImage`, from the resolver) is the venv's python, then what `import torch` dlopens
(`verify/stack/torch_loads.py`), then the native library bitsandbytes would pick (`verify/stack/bnb_library.py`). This
module judges it:

- nothing is missing and no file is broken;
- torch's ROCm libraries come from torch/lib: every ROCm name a torch object asks for is served by torch's bundled
  copy when torch bundles one (the wheel stopped bundling some, e.g. librocm_smi64: those must come from the
  expected release's /opt/rocm-X.Y.Z);
- every NEEDED of the bitsandbytes ROCm library is found — already loaded from torch/lib, or under /opt/rocm-X.Y.Z;
- no ROCm library comes from anywhere else (a distro 5.x/6.x package in /usr/lib, another ROCm release);
- two copies of one ROCm library (torch's and the system's) in one process are a warning: mixed runtimes are known to
  fail at run time (ROCm/pytorch#1340).
Each failure names the library, where the loader looked, and the fix.
"""

from __future__ import annotations

import functools
import os
import posixpath
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from verify.checks import strays
from verify.checks.host import Host, result
from verify.checks.versions import INSTALL_ROCM_FIX
from verify.ld.elf import ElfError
from verify.ld.fsview import FileSystemView
from verify.ld.image import ALREADY_LOADED, MAIN_PROGRAM, NOT_FOUND, RPATH, RUNPATH, ProcessImage, Request
from verify.ld.process import Analyser
from verify.report.report import ELSEWHERE, FAIL, PASS, WARN, CheckResult, StatusLine
from verify.stack.bnb_library import BnbChoice, select_bnb_library
from verify.stack.rocm_libraries import family, is_rocm_library
from verify.stack.torch_loads import torch_import_dlopens
from verify.stack.venv_layout import Venv, torch_version_module

TORCH_LIB = "torch/lib"
TITLE = "static linkage: python → torch → bitsandbytes"


@dataclass(frozen=True)
class Places:
    """Where ROCm libraries may legitimately come from, as canonical host paths."""

    torch_lib: str  # …/site-packages/torch/lib
    rocm_dir: str  # /opt/rocm-7.2.4
    release: str

    @classmethod
    def of_venv(cls, site_packages: str, release: str, view: FileSystemView) -> Places:
        """The venv's torch/lib and /opt/rocm-RELEASE, symlinks resolved (inside the image `view` shows)."""
        return cls(
            torch_lib=view.real_path(posixpath.join(site_packages, "torch", "lib")),
            rocm_dir=view.real_path(f"/opt/rocm-{release}"),
            release=release,
        )

    def origin(self, canonical: str) -> str:
        if canonical.startswith(self.torch_lib + "/"):
            return TORCH_LIB
        if canonical.startswith(self.rocm_dir + "/"):
            return f"ROCm {self.release}"
        return ELSEWHERE


def _fix_for_missing(request: Request, release: str) -> str:
    if is_rocm_library(request.name):
        return INSTALL_ROCM_FIX.format(release=release)
    return f"install the package that provides {request.name}"


def judge_linkage(
    image: ProcessImage,
    *,
    bnb_library: str,
    site_packages: str,
    release: str,
    view: FileSystemView,
    owners: Mapping[str, str] | None = None,
    notes: Iterable[str] = (),
) -> CheckResult:
    """Judge the predicted process. `owners` maps a canonical file path to "package version (distro)" when known."""
    # Memoised: every request's requester is resolved, a few dozen distinct paths asked for hundreds of times.
    real = functools.cache(view.real_path)
    places = Places.of_venv(site_packages, release, view)
    owners = owners or {}
    bnb_real = real(bnb_library)
    problems: list[str] = []
    shorts: list[str] = []  # the same problems in a few words each, for the fleet summary's column
    warnings: list[str] = list(notes)

    def problem(text: str, short: str) -> None:
        problems.append(text)
        shorts.append(short)

    for finding in image.findings:
        problem(
            f"{finding.message} — reinstall what ships {posixpath.basename(finding.path)}",
            f"{posixpath.basename(finding.path)} unreadable",
        )

    for request in image.missing:
        if request.kind == "dlopen" and request.name == bnb_library:
            problem(
                f"{posixpath.basename(bnb_library)} is not in the installed bitsandbytes ({request.describe()}) — "
                "reinstall bitsandbytes",
                f"{posixpath.basename(bnb_library)} missing",
            )
            continue
        problem(f"{describe_miss(request)} — {_fix_for_missing(request, release)}", f"{request.name} not found")

    rocm_objects = []
    for obj in image.objects:
        if obj.how == MAIN_PROGRAM:
            continue
        names = (obj.requested_as, obj.soname or "", obj.path)
        if not any(is_rocm_library(n) for n in names if n):
            continue
        canonical = real(obj.path)
        origin = places.origin(canonical)
        owner = owners.get(canonical)
        rocm_objects.append(
            {
                "path": obj.path,
                "real_path": canonical,
                "requested_as": obj.requested_as,
                "via": obj.via,
                "origin": origin,
                "package": owner,
            }
        )
        if origin == ELSEWHERE:
            source = f" from {owner}" if owner else ""
            if "/opt/rocm" in canonical:
                fix = f"point /opt/rocm at /opt/rocm-{release} or remove the other ROCm release"
            elif owner:
                package = owner.split()[0]
                fix = f"remove {package} (apt purge {package}, or stray_policy: remove)"
            else:
                fix = "remove the distro ROCm package that ships it (`verify strays` names it)"
            problem(
                f"{obj.requested_as} resolves to {canonical}{source} (via {obj.via}), not torch/lib or "
                f"/opt/rocm-{release} — {fix}",
                f"{obj.requested_as} from {owner.split(' (')[0] if owner else canonical}",
            )

    # torch's own ROCm requests must be served by its bundled copies when it has them.
    torch_dir = real(posixpath.join(site_packages, "torch"))
    for request in image.requests:
        if not request.found or not request.requester or not is_rocm_library(request.name):
            continue
        if not real(request.requester).startswith(torch_dir + "/"):
            continue
        bundled = posixpath.join(places.torch_lib, request.name)
        if not view.local(bundled).exists():
            continue
        served = real(request.path or "")
        if served != bundled:
            problem(
                f"torch's {request.name} resolves to {served} ({_how(request)}), not its bundled {bundled} — "
                "unset LD_PRELOAD/LD_LIBRARY_PATH entries that bring another copy, or reinstall torch",
                f"torch's {request.name} not from torch/lib",
            )

    bnb_needed = []
    for request in image.requests:
        if request.kind != "needed" or not request.requester or real(request.requester) != bnb_real:
            continue
        served = real(request.path) if request.path else None
        entry = {"name": request.name, "outcome": request.outcome, "path": served, "how": _how(request)}
        if served:
            entry["origin"] = places.origin(served)
        bnb_needed.append(entry)

    by_family: dict[str, set[str]] = {}
    for item in rocm_objects:
        by_family.setdefault(family(item["requested_as"]), set()).add(item["real_path"])
    for name, paths in sorted(by_family.items()):
        if len(paths) > 1:
            warnings.append(
                f"two copies of {name} in one process ({', '.join(sorted(paths))}): mixed ROCm runtimes can fail at "
                "run time (ROCm/pytorch#1340)"
            )

    evidence = {
        "executable": image.executable,
        "bnb_library": bnb_library,
        "bnb_needed": bnb_needed,
        "rocm_objects": rocm_objects,
        "missing": [r.describe() for r in image.missing],
        "findings": [f.message for f in image.findings],
        "problems": problems,
        "warnings": warnings,
        "short": None,
        "allowed_places": {"torch": places.torch_lib, "rocm": places.rocm_dir},
        "objects": len(image.objects),
    }
    if problems:
        evidence["short"] = ", ".join(shorts)
        also = f" (also: {', '.join(shorts[1:])})" if len(shorts) > 1 else ""
        return CheckResult("linkage.static", TITLE, FAIL, problems[0] + also, evidence)
    rocm_needed = [n for n in bnb_needed if is_rocm_library(n["name"])]
    summary = ", ".join(f"{n['name']} ← {n.get('origin', n['path'])}" for n in rocm_needed)
    counts: dict[str, int] = {}
    for item in rocm_objects:
        counts[item["origin"]] = counts.get(item["origin"], 0) + 1
    where = ", ".join(f"{count} from {origin}" for origin, count in sorted(counts.items())) or "none"
    reason = f"{posixpath.basename(bnb_library)}: {summary or 'no ROCm NEEDED'}; ROCm libraries: {where}"
    origins = sorted({n.get("origin", "?") for n in bnb_needed if is_rocm_library(n["name"])})
    evidence["short"] = f"bitsandbytes' ROCm libraries from {' and '.join(origins) or 'nowhere'}"
    if warnings:
        evidence["short"] += f"; {len(warnings)} warning(s)"
        return CheckResult("linkage.static", TITLE, WARN, f"{warnings[0]} ({reason})", evidence)
    return CheckResult("linkage.static", TITLE, PASS, reason, evidence)


def describe_miss(request: Request) -> str:
    """'libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found via RUNPATH /opt/rocm/lib:…, ld.so.cache,
    system dirs' — the requester by file name, its own RPATH/RUNPATH without repeating it (full paths: evidence)."""
    if request.outcome != NOT_FOUND:
        return request.describe()
    requester = posixpath.basename(request.requester) if request.requester else None
    steps = []
    for step in request.searched:
        dirs = ":".join(step.dirs)
        if step.kind in (RPATH, RUNPATH) and step.owner == request.requester:
            steps.append(f"{step.kind} {dirs}")
        elif step.owner:
            steps.append(f"{step.label.replace(step.owner, posixpath.basename(step.owner))}")
        else:
            steps.append(step.label)
    who = f" (needed by {requester})" if requester and request.kind == "needed" else ""
    return f"{request.name}{who} not found via {', '.join(steps) or 'nowhere (nothing to search)'}"


def _how(request: Request) -> str:
    if request.outcome == ALREADY_LOADED:
        return f"already loaded, matched by {request.matched_by}"
    if request.found_via is not None:
        return f"via {request.found_via.label}"
    return request.outcome


# --- this run's check: the process model of the venv's python, then the judgement ------------------------------------


@dataclass(frozen=True)
class LinkageInputs:
    """What the process model is made of: the library bitsandbytes would pick (None: bitsandbytes is not installed)
    and what `import torch` dlopens, as host paths (the maps check predicts the same loads again)."""

    choice: BnbChoice | None
    torch_dlopens: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def inputs(host: Host) -> LinkageInputs:
    """This run's inputs (read once; see Host.shared; none once the static part ran out of time: what it had is
    not trusted, and nothing is read outside its time limit)."""
    if host.static_stopped is not None:
        return LinkageInputs(None)
    return host.shared(_read_inputs)


def _read_inputs(host: Host) -> LinkageInputs:
    site_packages = host.venv.site_packages
    bnb_dir = site_packages / "bitsandbytes"
    if not bnb_dir.is_dir():
        return LinkageInputs(None)
    constants = torch_version_module(site_packages)
    choice = select_bnb_library(bnb_dir, constants.get("hip"), host.options.environ, host.release)
    loads = torch_import_dlopens(site_packages, _python_tag(host.venv))
    return LinkageInputs(choice, tuple(host.view.image_path(p) for p in loads.dlopens), loads.notes)


def _python_tag(venv: Venv) -> str | None:
    name = venv.site_packages.parent.name  # "python3.11"
    return name.replace("python", "").replace(".", "") if name.startswith("python") else None


def resolve(host: Host, executable: str, dlopens: Iterable[str], environ: Mapping[str, str]) -> ProcessImage:
    """The process model on this run's view of the host's files (`environ`: the process environment the loader reads,
    only LD_LIBRARY_PATH matters)."""
    analyser = Analyser(host.view.image_root, fs=host.view)
    return analyser.resolve_process(executable, dlopens, library_path=environ.get("LD_LIBRARY_PATH"))


def run(host: Host) -> list[CheckResult]:
    options, view = host.options, host.view
    found = inputs(host)
    choice = found.choice
    if choice is None:
        return [
            CheckResult(
                "linkage.static",
                TITLE,
                FAIL,
                f"bitsandbytes is not installed in {options.venv} — pip install "
                f"bitsandbytes=={options.expect_bitsandbytes}",
                {},
            )
        ]
    bnb_host = view.image_path(choice.path)
    evidence_choice = {"library": choice.name, "rule": choice.rule, "warning": choice.warning, "error": choice.error}
    if choice.error:
        return [
            CheckResult(
                "linkage.static",
                TITLE,
                FAIL,
                f"bitsandbytes would load no ROCm library: {choice.error}",
                {"bnb_choice": evidence_choice},
            )
        ]
    if not choice.path.exists():
        return [
            CheckResult(
                "linkage.static",
                TITLE,
                FAIL,
                f"bitsandbytes would fail with 'No compatible ROCm binary found at {bnb_host}' "
                f"({choice.rule}) — install torch for ROCm {options.expect_rocm} and "
                f"bitsandbytes=={options.expect_bitsandbytes}",
                {"bnb_choice": evidence_choice},
            )
        ]
    executable = str(options.venv / "bin" / "python")
    torch_dlopens = list(found.torch_dlopens)
    try:
        image = resolve(host, executable, [*torch_dlopens, bnb_host], options.environ)
    except (ElfError, OSError) as error:
        return [
            CheckResult(
                "linkage.static",
                TITLE,
                FAIL,
                f"cannot analyse {executable}: {error} — recreate the venv",
                {"bnb_choice": evidence_choice},
            )
        ]
    notes = list(found.notes)
    if choice.warning:
        notes.append(choice.warning)
    if options.environ.get("LD_PRELOAD"):
        notes.append(f"LD_PRELOAD={options.environ['LD_PRELOAD']!r} is set: preloaded objects are not modelled")
    result = judge_linkage(
        image,
        bnb_library=bnb_host,
        site_packages=view.image_path(host.venv.site_packages),
        release=options.expect_rocm,
        view=view,
        owners=strays.owners(host),
        notes=notes,
    )
    evidence = dict(result.evidence, bnb_choice=evidence_choice, torch_dlopens=torch_dlopens)
    unsafe = _not_regular_files([finding.path for finding in image.findings], view)
    if unsafe:
        evidence["not_regular_files"] = unsafe
        host.runtime_blocked = (
            f"{', '.join(unsafe)}: not a regular file where the process would load a library (a "
            "FIFO would block the probe for ever) — remove it and reinstall what owns that path"
        )
    return [CheckResult(result.id, result.title, result.status, result.reason, evidence)]


def _not_regular_files(paths: list[str], view: FileSystemView) -> list[str]:
    """Which of these paths (the files the analysis could not use) exist but are not regular files: the runtime probe
    would dlopen them, and a FIFO blocks that for ever."""
    found = []
    for path in dict.fromkeys(paths):
        try:
            mode = os.stat(view.local(path)).st_mode
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(mode):
            found.append(path)
    return found


def facts(host: Host, results: list[CheckResult]) -> dict:
    found = result(results, "linkage.static")
    return {"linkage": StatusLine(found.status, found.reason, found.evidence.get("short")) if found else None}
