"""verify/checks/versions.py: installed versions, read from files (the real torch-cpu venv, and small images)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.verify_runs import torch_cpu_venv
from verify.checks.versions import (
    check_bitsandbytes_version,
    check_system_rocm,
    check_torch_build,
    dpkg_installed_version,
    release_of,
)
from verify.debian.dpkg import read_status
from verify.ld.fsview import FileSystemView
from verify.stack.venv_layout import find_venv


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.mark.slow
def test_real_cpu_torch_is_not_a_rocm_build_and_real_bitsandbytes_is_0_50_1():
    venv = find_venv(torch_cpu_venv())
    torch = check_torch_build(venv, "7.2.4")
    assert torch.status == "fail"
    assert torch.reason.startswith("torch 2.13.0+cpu is not a ROCm 7.2 build (torch.version.hip is None)")
    assert check_bitsandbytes_version(venv, "0.50.1").status == "pass"
    wrong = check_bitsandbytes_version(venv, "0.49.0")
    assert wrong.status == "fail" and "pip install bitsandbytes==0.49.0" in wrong.reason


def test_system_rocm_from_info_version_and_rocm_core(tmp_path: Path):
    assert check_system_rocm(FileSystemView(str(tmp_path)), "7.2.4").reason.startswith("no system ROCm")
    write(tmp_path, "/opt/rocm-7.2.4/.info/version", "7.2.4-93\n")
    (tmp_path / "opt" / "rocm").symlink_to("/opt/rocm-7.2.4")  # absolute, resolved inside the image
    write(
        tmp_path,
        "/var/lib/dpkg/status",
        "Package: rocm-core\nStatus: install ok installed\nVersion: 7.2.4.70204-93~24.04\n\n"
        "Package: rocm-core-old\nStatus: deinstall ok config-files\nVersion: 6.4.1.60401-83~24.04\n",
    )
    assert check_system_rocm(FileSystemView(str(tmp_path)), "7.2.4").status == "pass"
    other = check_system_rocm(FileSystemView(str(tmp_path)), "7.2.5")
    assert other.status == "fail"
    assert "/opt/rocm/.info/version says 7.2.4, rocm-core says 7.2.4" in other.reason


def test_the_status_file_parsed_once_serves_the_check(tmp_path: Path):
    """`verify check` parses dpkg's status once, for the strays check and this one: what it parsed is what counts."""
    write(tmp_path, "/opt/rocm/.info/version", "7.2.4-93\n")
    write(
        tmp_path,
        "/var/lib/dpkg/status",
        "Package: rocm-core\nStatus: hold ok installed\nVersion: 7.2.4.70204-93~24.04\n\n"
        "Package: rocm-core\nStatus: install ok unpacked\nArchitecture: i386\nVersion: 6.4.1.60401-83~24.04\n",
    )
    packages = read_status(tmp_path)
    (tmp_path / "var/lib/dpkg/status").unlink()
    check = check_system_rocm(FileSystemView(str(tmp_path)), "7.2.4", packages)
    assert check.status == "pass" and check.evidence["rocm_core_package"] == "7.2.4.70204-93~24.04"
    assert check_system_rocm(FileSystemView(str(tmp_path)), "7.2.4").reason.startswith(
        "system ROCm is not 7.2.4: rocm-core says nothing"
    )


def test_a_removed_package_is_not_installed(tmp_path: Path):
    write(
        tmp_path,
        "/var/lib/dpkg/status",
        "Package: rocm-core\nStatus: deinstall ok config-files\nVersion: 7.2.4.70204-93\n",
    )
    assert dpkg_installed_version(tmp_path, "rocm-core") is None
    assert release_of("7.2.4.70204-93~24.04") == "7.2.4" and release_of("7.2.4-93") == "7.2.4"
    assert release_of("garbage") is None


def test_torch_rocm_build_is_recognised_from_its_metadata(tmp_path: Path):
    """A venv tree with the dist-info and version.py a torch rocm7.2 wheel installs (the wheel itself can't be here)."""
    venv = tmp_path / "venv"
    write(venv, "/pyvenv.cfg", "home = /usr/bin\n")
    write(venv, "/bin/python", "")
    site = "/lib/python3.11/site-packages"
    write(
        venv,
        f"{site}/torch-2.13.0+rocm7.2.dist-info/METADATA",
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0+rocm7.2\n\n",
    )
    write(
        venv, f"{site}/torch/version.py", "__version__ = '2.13.0+rocm7.2'\nhip: Optional[str] = '7.2.53211-c6ad5c8c8'\n"
    )
    assert check_torch_build(find_venv(venv), "7.2.4").status == "pass"
    assert check_torch_build(find_venv(venv), "7.1.0").status == "fail"
