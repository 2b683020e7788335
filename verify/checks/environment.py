"""Checks `environment.loader`, `environment.bnb_rocm_version`, `environment.amdsmi` — what a user's Python would see
that the clean-environment linkage check does not.

- `environment.loader`: every LD_LIBRARY_PATH a login sets (/etc/environment, environment.d, /etc/profile.d, the
  venv's bin/activate — verify/system/environment.py reads them, runs nothing) is put into the process model again,
  and every binding that moves is named, e.g. `libhipblas.so.3 → /opt/rocm/lib/libhipblas.so.3 (was
  /opt/rocm-7.2.4/lib/…)`; a setting under which the linkage judgement fails (torch's libamdhip64.so no longer from
  torch/lib: pytorch/builder#1468) fails the check. LD_PRELOAD settings and /etc/ld.so.preload entries are named
  (preloading is not modelled), as are lines that set a variable in a form not understood, environment generators
  whose output cannot be known without running them, and ld.so.conf directories of another ROCm release.
- `environment.bnb_rocm_version`: BNB_ROCM_VERSION set anywhere to another tag than torch's HIP (or the expected
  release) implies: bitsandbytes then loads that build, with no fallback (bitsandbytes PR #1878, #1890).
- `environment.amdsmi`: the PyPI `amdsmi` package in the venv (pytorch#186516: torch.cuda.device_count() returns 0
  beside torch's bundled libamd_smi).
"""

from __future__ import annotations

import posixpath

from verify.checks import linkage, strays
from verify.checks.host import Host, result
from verify.ld.elf import ElfError
from verify.ld.image import ProcessImage
from verify.report.report import FAIL, PASS, WARN, CheckResult, StatusLine
from verify.stack.bnb_library import hip_version_tuple, release_tag
from verify.stack.venv_layout import dist_version, torch_version_module
from verify.system.environment import LoaderEnvironment, read_loader_environment

LOADER, BNB, AMDSMI = "environment.loader", "environment.bnb_rocm_version", "environment.amdsmi"
_DIR_OF_RELEASE = "/opt/rocm-"


def loader_environment(host: Host) -> LoaderEnvironment:
    """This run's reading of the environment files (once; see Host.shared)."""
    return host.shared(_read)


def _read(host: Host) -> LoaderEnvironment:
    return read_loader_environment(host.view, str(host.venv.root))


def bindings(image: ProcessImage, real) -> dict[str, str]:
    """Requested name → the file it resolves to (canonical), for every object of the process."""
    return {obj.requested_as: real(obj.path) for obj in image.objects if obj.requested_as}


def moved_bindings(clean: ProcessImage, other: ProcessImage, real) -> list[str]:
    """One line per binding that differs between the clean process and `other`."""
    before, after = bindings(clean, real), bindings(other, real)
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            lines.append(f"{name} now also loaded, from {new}")
        elif new is None:
            lines.append(f"{name} ({old}) no longer loaded")
        else:
            lines.append(f"{name} → {new} (was {old})")
    before_missing = {r.name for r in clean.missing}
    for request in other.missing:
        if request.name not in before_missing:
            lines.append(f"{request.name} is no longer found")
    return lines


def _model(host: Host, library_path: str | None):
    """(image, bitsandbytes' library as an image path), or None when there is no process to model."""
    found = linkage.inputs(host)
    choice = found.choice
    if choice is None or choice.error or not choice.path.exists():
        return None
    bnb = host.view.image_path(choice.path)
    executable = str(host.options.venv / "bin" / "python")
    env = {"LD_LIBRARY_PATH": library_path} if library_path is not None else {}
    return linkage.resolve(host, executable, [*found.torch_dlopens, bnb], env), bnb


def _problems(judged: CheckResult) -> dict[str, str]:
    """The linkage judgement's problems, keyed by their few-word form ("libhipblas.so.3 not found"): the long form
    names the places searched, which differ with every LD_LIBRARY_PATH."""
    if judged.status != FAIL:
        return {}
    shorts = (judged.evidence.get("short") or "").split(", ")
    texts = judged.evidence.get("problems") or []
    return dict(zip(shorts, texts)) if len(shorts) == len(texts) else {text: text for text in texts}


def check_loader(host: Host) -> CheckResult:
    title = "the loader environment of a login (LD_LIBRARY_PATH, LD_PRELOAD, ld.so.preload)"
    env = loader_environment(host)
    evidence = env.to_json()
    problems: list[str] = []  # fail
    warnings: list[str] = []
    moved_evidence = []
    settings = env.applied("LD_LIBRARY_PATH")
    if settings:
        try:
            clean = _model(host, None)
        except (ElfError, OSError):
            clean = None
        if clean is not None:
            image, bnb = clean
            real = host.view.real_path

            def judge(process: ProcessImage) -> CheckResult:
                return linkage.judge_linkage(
                    process,
                    bnb_library=bnb,
                    site_packages=host.view.image_path(host.venv.site_packages),
                    release=host.options.expect_rocm,
                    view=host.view,
                    owners=strays.owners(host),
                )

            clean_problems = set(_problems(judge(image)))
            for setting in settings:
                other, _ = _model(host, setting.value or None)
                moved = moved_bindings(image, other, real)
                judged = judge(other)
                # Only what this setting breaks: a host that fails the clean check already says so in linkage.static.
                new = [text for short, text in _problems(judged).items() if short not in clean_problems]
                moved_evidence.append({"setting": setting.to_json(), "moved": moved, "new_problems": new})
                said = (
                    f"LD_LIBRARY_PATH={setting.value} ({setting.where}{', conditional' if setting.conditional else ''})"
                )
                shown = "; ".join(moved[:3]) + (f" (+{len(moved) - 3} more)" if len(moved) > 3 else "")
                if new:
                    problems.append(
                        f"{said} breaks the process: {new[0].split(' — ')[0]}"
                        f"{'; it moves ' + shown if moved else ''} — remove that line (torch's "
                        f"libraries and /opt/rocm-{host.options.expect_rocm} are found without it)"
                    )
                elif moved:
                    warnings.append(f"{said} moves {shown} — remove that line unless it is meant")
        else:
            warnings.append(
                "LD_LIBRARY_PATH is set ("
                + ", ".join(s.describe() for s in settings)
                + ") but there is no process to model"
            )
    evidence["moved_bindings"] = moved_evidence
    for setting in env.applied("LD_PRELOAD"):
        if setting.value:
            warnings.append(
                f"LD_PRELOAD={setting.value} ({setting.where}) preloads into every Python — preloading "
                "is not modelled: remove it, or check the library brings no ROCm runtime"
            )
    if env.preload:
        warnings.append(
            f"/etc/ld.so.preload preloads {', '.join(env.preload)} into every process (not modelled) — "
            "remove the entries unless they are meant"
        )
    for line in env.unparsed:
        warnings.append(
            f"{line.describe()} sets a watched variable in a form this check does not read (nothing is "
            "run to find out) — simplify it to NAME=VALUE, or check it by hand"
        )
    for error in env.unreadable:
        warnings.append(f"cannot read {error}")
    other_release = [
        d
        for d in env.rocm_conf_dirs
        if d.startswith(_DIR_OF_RELEASE)
        and not d.startswith(f"{_DIR_OF_RELEASE}{host.options.expect_rocm}/")
        and d != f"{_DIR_OF_RELEASE}{host.options.expect_rocm}"
    ]
    if other_release:
        warnings.append(
            f"ld.so.conf names {', '.join(other_release)}, another ROCm release: ldconfig puts its "
            "libraries into the cache every process searches — remove that file from /etc/ld.so.conf.d"
        )
    notes = []
    if env.unknown_generators:
        notes.append(f"not run: {', '.join(env.unknown_generators)} (environment generators; what they set is unknown)")
    if problems:
        also = f" (also: {len(problems) + len(warnings) - 1} more)" if len(problems) + len(warnings) > 1 else ""
        return CheckResult(LOADER, title, FAIL, problems[0] + also, evidence)
    if warnings:
        also = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
        return CheckResult(LOADER, title, WARN, warnings[0] + also, evidence)
    looked = "/etc/environment, environment.d, /etc/profile.d, the venv's activate, /etc/ld.so.preload"
    said = (
        f"LD_LIBRARY_PATH set ({', '.join(s.describe() for s in settings)}) and no binding moves"
        if settings
        else "no LD_LIBRARY_PATH or LD_PRELOAD"
    )
    return CheckResult(LOADER, title, PASS, f"{said} in {looked}{'; ' + notes[0] if notes else ''}", evidence)


def check_bnb_rocm_version(host: Host) -> CheckResult:
    title = "BNB_ROCM_VERSION agrees with torch's HIP"
    env = loader_environment(host)
    hip = torch_version_module(host.venv.site_packages).get("hip")
    runtime = hip_version_tuple(hip)
    wanted = f"{runtime[0]}{runtime[1]}" if runtime else release_tag(host.options.expect_rocm)
    basis = f"torch's HIP {hip}" if runtime else f"ROCm {host.options.expect_rocm} (torch reports no HIP)"
    settings = [s for s in env.applied("BNB_ROCM_VERSION") if s.value is not None]
    evidence = {"settings": [s.to_json() for s in settings], "torch_hip": hip, "wanted_tag": wanted}
    wrong = [s for s in settings if s.value != wanted]
    if wrong:
        first = wrong[0]
        return CheckResult(
            BNB,
            title,
            FAIL,
            f"BNB_ROCM_VERSION={first.value} ({first.where}) makes bitsandbytes load "
            f"libbitsandbytes_rocm{first.value}.so, with no fallback, but {basis} needs "
            f"libbitsandbytes_rocm{wanted}.so — remove that line (bitsandbytes picks the right build "
            "by itself)",
            evidence,
        )
    if settings:
        return CheckResult(
            BNB, title, PASS, f"BNB_ROCM_VERSION={wanted} ({settings[0].where}) matches {basis}", evidence
        )
    return CheckResult(BNB, title, PASS, "BNB_ROCM_VERSION is set nowhere: bitsandbytes follows torch's HIP", evidence)


def check_amdsmi(host: Host) -> CheckResult:
    title = "no PyPI amdsmi in the venv"
    version = dist_version(host.venv.site_packages, "amdsmi")
    evidence = {"amdsmi": version}
    if version is None:
        return CheckResult(AMDSMI, title, PASS, "the PyPI amdsmi package is not installed", evidence)
    site = posixpath.join(host.view.image_path(host.venv.site_packages), "amdsmi")
    return CheckResult(
        AMDSMI,
        title,
        WARN,
        f"amdsmi {version} is installed in the venv ({site}): beside torch's bundled libamd_smi, "
        "torch.cuda.device_count() can return 0 (pytorch#186516) — pip uninstall amdsmi (as the venv's "
        "owner) unless something needs it",
        evidence,
    )


def run(host: Host) -> list[CheckResult]:
    return [check_loader(host), check_bnb_rocm_version(host), check_amdsmi(host)]


def facts(host: Host, results: list[CheckResult]) -> dict:
    found = result(results, LOADER)
    return {"environment": StatusLine(found.status, found.reason) if found else None}
