"""verify/checks/environment.py on filesystem images (tests/support/standin_rocm.py: gcc-built stand-ins with the
real names, RPATHs and RUNPATHs of the torch ROCm wheel and bitsandbytes' library), through the real
`verify check --root`: a login's LD_LIBRARY_PATH put into the process model, BNB_ROCM_VERSION against torch's HIP,
and a PyPI amdsmi in the venv."""

from __future__ import annotations

import shutil

import pytest

from tests.support.standin_rocm import SITE, StandinImage
from tests.support.verify_runs import run_check_root


def _check(report, check_id):
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.fixture
def image(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch(
        bundled_sonames="bare"
    )  # torch's copies named libhipblas.so …: bitsandbytes' libhipblas.so.3 is searched
    image.bitsandbytes()
    image.system_rocm()
    return image


def test_a_clean_login_environment_passes(image):
    report, code = run_check_root(image.root)
    assert code == 0, report["reason"]
    assert _check(report, "environment.loader")["status"] == "pass"
    assert report["facts"]["environment"]["status"] == "pass"


def test_ld_library_path_in_etc_environment_that_moves_bitsandbytes_hipblas_to_another_release_fails(image):
    other = image.path("/opt/rocm-6.4.1/lib")
    other.mkdir(parents=True)
    for name in ("libhipblas.so.3", "libhipblaslt.so.1", "libamdhip64.so.7"):
        shutil.copy2(image.path(f"/opt/rocm-7.2.4/lib/{name}"), other / name)
    image.write("/etc/environment", 'PATH="/usr/local/bin:/usr/bin:/bin"\nLD_LIBRARY_PATH="/opt/rocm-6.4.1/lib"\n')
    report, code = run_check_root(image.root)
    check = _check(report, "environment.loader")
    assert check["status"] == "fail" and code == 1
    assert check["reason"].startswith(
        "LD_LIBRARY_PATH=/opt/rocm-6.4.1/lib (/etc/environment:2) breaks the process: libhipblas.so.3 resolves to "
        "/opt/rocm-6.4.1/lib/libhipblas.so.3"
    )
    assert (
        "libhipblas.so.3 → /opt/rocm-6.4.1/lib/libhipblas.so.3 (was /opt/rocm-7.2.4/lib/libhipblas.so.3)"
        in check["reason"]
    )
    assert check["reason"].endswith("— remove that line (torch's libraries and /opt/rocm-7.2.4 are found without it)")
    # The clean check still passes: it is the login's environment that breaks the process.
    assert _check(report, "linkage.static")["status"] != "fail"  # (a warning: torch's bare-named HIP beside ROCm's)
    assert report["reason"].startswith("environment.loader: LD_LIBRARY_PATH=/opt/rocm-6.4.1/lib")
    # Reverted: passes again.
    image.write("/etc/environment", 'PATH="/usr/local/bin:/usr/bin:/bin"\n')
    report, code = run_check_root(image.root)
    assert _check(report, "environment.loader")["status"] == "pass" and code == 0


def test_a_binding_that_moves_without_breaking_anything_is_a_warning(image):
    extra = image.path("/usr/local/lib/extra")
    extra.mkdir(parents=True)
    shutil.copy2(image.path("/lib/x86_64-linux-gnu/libc.so.6"), extra / "libc.so.6")
    image.write(
        "/opt/rocm-fleet/venv/bin/activate",
        'VIRTUAL_ENV="/opt/rocm-fleet/venv"\nexport VIRTUAL_ENV\n'
        'export LD_LIBRARY_PATH="/usr/local/lib/extra:$LD_LIBRARY_PATH"\n',
    )
    report, _ = run_check_root(image.root)
    check = _check(report, "environment.loader")
    assert check["status"] == "warn"
    assert check["reason"].startswith(
        "LD_LIBRARY_PATH=/usr/local/lib/extra: (/opt/rocm-fleet/venv/bin/activate:3) moves libc.so.6 → "
        "/usr/local/lib/extra/libc.so.6 (was /lib/x86_64-linux-gnu/libc.so.6)"
    )


def test_bnb_rocm_version_against_torchs_hip(image):
    image.write("/etc/profile.d/bnb.sh", "export BNB_ROCM_VERSION=71\n")
    report, code = run_check_root(image.root)
    check = _check(report, "environment.bnb_rocm_version")
    assert check["status"] == "fail" and code == 1
    assert check["reason"] == (
        "BNB_ROCM_VERSION=71 (/etc/profile.d/bnb.sh:1) makes bitsandbytes load libbitsandbytes_rocm71.so, with no "
        "fallback, but torch's HIP 7.2.53211-standin needs libbitsandbytes_rocm72.so — remove that line (bitsandbytes "
        "picks the right build by itself)"
    )
    image.write("/etc/profile.d/bnb.sh", "export BNB_ROCM_VERSION=72\n")
    report, _ = run_check_root(image.root)
    assert _check(report, "environment.bnb_rocm_version")["status"] == "pass"


def test_pypi_amdsmi_in_the_venv_is_a_warning(image):
    image.write(f"{SITE}/amdsmi-26.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: amdsmi\nVersion: 26.0.0\n\n")
    report, _ = run_check_root(image.root)
    check = _check(report, "environment.amdsmi")
    assert check["status"] == "warn" and "pytorch#186516" in check["reason"]
