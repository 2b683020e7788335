"""Check 2 — installed versions, read from files: torch's build, bitsandbytes' version, the system ROCm release.

- torch: the version pip recorded (`torch-*.dist-info/METADATA`, e.g. `2.13.0+rocm7.2`) and `torch/version.py`'s
  `hip`; a ROCm 7.2 build has the local label `rocm7.2` *and* a hip version 7.2.x;
- bitsandbytes: its recorded version;
- system ROCm: `/opt/rocm/.info/version` (what the installed ROCm says it is) and the `rocm-core` package's version
  in `/var/lib/dpkg/status` (what dpkg installed); both must name the expected release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from verify.checks.host import Host
from verify.debian.dpkg import DpkgDatabaseError, DpkgPackage, read_status
from verify.ld.fsview import FileSystemView
from verify.report.report import FAIL, PASS, CheckResult
from verify.safe_read import read_text
from verify.stack.venv_layout import Venv, dist_version, torch_version_module

INSTALL_ROCM_FIX = "install ROCm {release} (amdgpu-install -y --usecase=rocm --no-dkms)"
_RELEASE = re.compile(r"(\d+\.\d+\.\d+)")


def rocm_info_version(view: FileSystemView) -> str | None:
    """The first line of /opt/rocm/.info/version (e.g. "7.2.4-93"), or None."""
    try:
        text = read_text(view.local("/opt/rocm/.info/version"), 64 << 10, errors="replace", follow=view.is_host)
    except OSError:
        return None
    return text.strip().splitlines()[0].strip() if text.strip() else None


def dpkg_installed_version(root: Path, package: str, packages: Iterable[DpkgPackage] | None = None) -> str | None:
    """The version of `package` when dpkg has it installed (state "installed"), else None.

    `packages`: the status file's packages when the caller has parsed them already (`verify check` reads the file once
    for the strays check and this one: the apt hook runs after every dpkg run, and the file is a few MB on a
    desktop)."""
    if packages is None:
        try:
            packages = read_status(root)
        except DpkgDatabaseError:  # no status file, unreadable, or not one: nothing is installed as far as dpkg says
            return None
    return next((p.version for p in packages if p.name == package and p.state == "installed"), None)


def release_of(version: str | None) -> str | None:
    """'7.2.4.70204-93~24.04' or '7.2.4-93' → '7.2.4'."""
    if not version:
        return None
    match = _RELEASE.match(version)
    return match.group(1) if match else None


def check_torch_build(venv: Venv, expected_release: str) -> CheckResult:
    version = dist_version(venv.site_packages, "torch")
    constants = torch_version_module(venv.site_packages)
    hip = constants.get("hip")
    major_minor = ".".join(expected_release.split(".")[:2])
    evidence = {"torch_version": version, "torch_version_py_hip": hip, "expected_label": f"rocm{major_minor}"}
    title = f"torch is a ROCm {major_minor} build"
    if version is None:
        return CheckResult(
            "versions.torch", title, FAIL, f"torch is not installed in {venv.root} — run the venv stage", evidence
        )
    label = version.partition("+")[2]
    hip_ok = bool(hip) and (hip == major_minor or hip.startswith(major_minor + "."))
    if label == f"rocm{major_minor}" and hip_ok:
        return CheckResult("versions.torch", title, PASS, f"torch {version} (HIP {hip})", evidence)
    what = f"torch {version} is not a ROCm {major_minor} build (torch.version.hip is {hip!r})"
    return CheckResult(
        "versions.torch",
        title,
        FAIL,
        f"{what} — install the rocm{major_minor} torch wheel into {venv.root} (the venv stage does this)",
        evidence,
    )


def check_bitsandbytes_version(venv: Venv, expected: str) -> CheckResult:
    version = dist_version(venv.site_packages, "bitsandbytes")
    evidence = {"bitsandbytes_version": version, "expected": expected}
    title = f"bitsandbytes is {expected}"
    if version == expected:
        return CheckResult("versions.bitsandbytes", title, PASS, f"bitsandbytes {version}", evidence)
    found = "not installed" if version is None else f"{version} installed"
    return CheckResult(
        "versions.bitsandbytes",
        title,
        FAIL,
        f"bitsandbytes {found} in {venv.root}, expected {expected} — pip install bitsandbytes=={expected}",
        evidence,
    )


def check_system_rocm(
    view: FileSystemView, expected_release: str, packages: Iterable[DpkgPackage] | None = None
) -> CheckResult:
    """`packages`: the dpkg status file's packages, when the caller has them (see dpkg_installed_version)."""
    info = rocm_info_version(view)
    core = dpkg_installed_version(Path(view.image_root), "rocm-core", packages)
    versioned_dir = view.local(f"/opt/rocm-{expected_release}")
    evidence = {
        "opt_rocm_info_version": info,
        "rocm_core_package": core,
        f"/opt/rocm-{expected_release}": versioned_dir.is_dir(),
        "expected": expected_release,
    }
    title = f"system ROCm is {expected_release}"
    fix = INSTALL_ROCM_FIX.format(release=expected_release)
    if info is None and core is None:
        return CheckResult(
            "versions.rocm",
            title,
            FAIL,
            f"no system ROCm (no /opt/rocm/.info/version, rocm-core not installed) — {fix}",
            evidence,
        )
    releases = {"/opt/rocm/.info/version": release_of(info), "rocm-core": release_of(core)}
    wrong = {where: found for where, found in releases.items() if found != expected_release}
    if not wrong:
        return CheckResult("versions.rocm", title, PASS, f"ROCm {expected_release} (rocm-core {core})", evidence)
    said = ", ".join(f"{where} says {found or 'nothing'}" for where, found in wrong.items())
    reason = f"system ROCm is not {expected_release}: {said} — {fix}"
    return CheckResult("versions.rocm", title, FAIL, reason, evidence)


def run(host: Host) -> list[CheckResult]:
    """The three version checks of this run (dpkg's packages parsed once, shared with the strays check)."""
    options = host.options
    return [
        check_system_rocm(host.view, options.expect_rocm, host.packages),
        check_torch_build(host.venv, options.expect_rocm),
        check_bitsandbytes_version(host.venv, options.expect_bitsandbytes),
    ]


def facts(host: Host, results: list[CheckResult]) -> dict:
    site_packages = host.venv.site_packages
    return {
        "rocm": rocm_info_version(host.view),
        "torch": dist_version(site_packages, "torch"),
        "torch_hip": torch_version_module(site_packages).get("hip"),
        "bitsandbytes": dist_version(site_packages, "bitsandbytes"),
    }
