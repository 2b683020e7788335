"""verify/checks/linkage.py: the static linkage check of python → torch → bitsandbytes, on workstation images.

The images (tests/support/standin_rocm.py) hold real gcc-built ELF files that carry the SONAMEs, NEEDED entries,
RPATHs and RUNPATHs of the torch ROCm wheel, bitsandbytes' ROCm library and ROCm 7.2.4 — STAND-INS, because none of
those can be installed here. The check runs as on a host: `python -m verify check --root IMAGE --json`.
The same check on the *real* bitsandbytes wheel (no system ROCm here) is in test_runtime_check.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.standin_rocm import SITE, StandinImage
from tests.support.verify_runs import run_check_root as verify_root


def linkage(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "linkage.static")


@pytest.fixture
def image(tmp_path: Path) -> StandinImage:
    return StandinImage(tmp_path / "image")


def test_torch_copies_with_upstream_sonames_serve_bitsandbytes_without_system_rocm(image):
    image.torch(bundled_sonames="upstream")
    image.bitsandbytes()
    report, code = verify_root(image.root)
    check = linkage(report)
    assert check["status"] == "pass", check
    needed = {n["name"]: n for n in check["evidence"]["bnb_needed"]}
    assert needed["libhipblas.so.3"]["origin"] == "torch/lib"
    assert needed["libhipblas.so.3"]["how"] == "already loaded, matched by soname"
    assert needed["libhipblas.so.3"]["path"] == f"{SITE}/torch/lib/libhipblas.so"
    # The host still has no system ROCm: that is its own failure, not a linkage one.
    assert report["reason"].startswith("versions.rocm: no system ROCm") and code == 1


def test_no_system_rocm_names_the_library_where_the_loader_looked_and_the_fix(image):
    image.torch(bundled_sonames="bare")  # torch's copies answer to libhipblas.so, not libhipblas.so.3
    image.bitsandbytes()
    report, code = verify_root(image.root)
    check = linkage(report)
    assert check["status"] == "fail" and code == 1
    assert check["reason"] == (
        "libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found via RUNPATH "
        "/opt/rocm/lib:/opt/rocm-7.2.4/lib, system dirs — install ROCm 7.2.4 (amdgpu-install -y --usecase=rocm "
        "--no-dkms) (also: libhipblaslt.so.1 not found)"
    )
    assert any("libhipblaslt.so.1" in problem for problem in check["evidence"]["problems"])
    assert report["reason"].startswith("linkage.static: libhipblas.so.3")


def test_system_rocm_serves_bitsandbytes_and_a_second_hip_runtime_is_a_warning(image):
    image.torch(bundled_sonames="bare")
    image.bitsandbytes()
    image.system_rocm()
    report, code = verify_root(image.root)
    check = linkage(report)
    assert check["status"] == "warn", check
    needed = {n["name"]: n for n in check["evidence"]["bnb_needed"]}
    # Found through the RUNPATH's /opt/rocm symlink chain, judged by where it really is.
    assert needed["libhipblas.so.3"]["origin"] == "ROCm 7.2.4"
    assert needed["libhipblas.so.3"]["path"] == "/opt/rocm-7.2.4/lib/libhipblas.so.3"
    assert "two copies of libamdhip64" in check["reason"]
    assert report["verdict"] == "warn" and code == 0


def test_a_distro_library_bound_instead_of_rocm_is_named_with_its_package(image):
    image.torch(bundled_sonames="bare")
    image.bitsandbytes()
    image.system_rocm(needed_by_hipblas=["librocm_smi64.so.1"])  # not shipped in the stand-in /opt/rocm-7.2.4
    image.distro_library("librocm_smi64.so.1", package="librocm-smi64-1", version="5.7.0-1", source="rocm-smi-lib")
    report, code = verify_root(image.root)
    check = linkage(report)
    assert check["status"] == "fail" and code == 1
    assert check["reason"].startswith(
        "librocm_smi64.so.1 resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 from librocm-smi64-1 5.7.0-1 "
        "(distro)"
    )
    assert check["reason"].endswith("remove librocm-smi64-1 (apt purge librocm-smi64-1, or stray_policy: remove)")
    assert report["facts"]["strays"]["binding_risk"] == ["librocm-smi64-1"]


def test_a_provisioned_image_passes_everything_static(image):
    image.torch(bundled_sonames="upstream")
    image.bitsandbytes()
    image.system_rocm()
    report, code = verify_root(image.root)
    assert [c["status"] for c in report["checks"]] == ["pass"] * 8 + ["skip"] * 3, report["checks"]
    # An image runs no kernel and boots none (kernel.*: skip); its environment files set nothing (environment.*).
    assert [c["id"] for c in report["checks"] if c["status"] == "skip"] == [
        "kernel.driver",
        "kernel.next_boot",
        "kernel.packages",
    ]
    assert code == 0 and report["request"]["static_only"] is True
    assert report["facts"]["rocm"] == "7.2.4-93"


def test_missing_bitsandbytes_build_for_the_torch_hip_release(image):
    image.torch(bundled_sonames="upstream", version="2.13.0+rocm8.0", hip="8.0.12345")
    image.bitsandbytes()
    report, _ = verify_root(image.root)
    check = linkage(report)
    assert check["status"] == "fail"
    assert "No compatible ROCm binary found at" in check["reason"] and "libbitsandbytes_rocm80.so" in check["reason"]
