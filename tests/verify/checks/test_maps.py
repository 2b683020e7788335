"""verify/checks/maps.py: the static prediction against /proc/self/maps of a real process.

The process is the runtime probe in the real torch-cpu venv (torch 2.13.0 and bitsandbytes 0.50.1 imported); the
prediction is the real resolver's. The negative case changes the real process (LD_LIBRARY_PATH brings another
libgomp.so.1 first) but not the prediction, and the comparison must notice.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.venvs import site_packages
from tests.support.verify_runs import cached_check, check_by_id, torch_cpu_venv
from verify.checks.linkage import Places
from verify.checks.maps import compare_maps
from verify.checks.runtime import run_probe
from verify.ld.process import resolve_process
from verify.stack.torch_loads import torch_import_dlopens


def places_for(venv: Path, tmp: Path) -> Places:
    return Places(
        torch_lib=os.path.realpath(site_packages(venv) / "torch" / "lib"),
        rocm_dir=str(tmp / "opt-rocm-7.2.4"),
        release="7.2.4",
    )


@pytest.mark.slow
def test_the_prediction_matches_what_the_real_process_mapped():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    maps = check_by_id(report, "runtime.maps")
    assert maps["status"] == "pass", maps
    assert maps["evidence"]["predicted_not_mapped"] == []
    assert maps["evidence"]["predicted"] >= 15
    assert [Path(p).name for p in maps["evidence"]["dlopens"]] == [
        "libtorch_global_deps.so",
        "_C.cpython-311-x86_64-linux-gnu.so",
        "libbitsandbytes_cpu.so",
    ]


@pytest.fixture(scope="module")
def probe_with_other_libgomp(tmp_path_factory):
    """The real probe, with LD_LIBRARY_PATH naming a directory that holds a copy of torch's libgomp.so.1."""
    venv = torch_cpu_venv()
    other = tmp_path_factory.mktemp("other-libgomp")
    shutil.copy2(site_packages(venv) / "torch" / "lib" / "libgomp.so.1", other / "libgomp.so.1")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": str(other)}
    run = run_probe(venv / "bin" / "python", "cpu", env=env)
    assert run.data is not None, run.error
    return venv, other, run.data


@pytest.mark.slow
def test_a_process_that_loaded_another_file_than_predicted_is_a_failure(probe_with_other_libgomp, tmp_path):
    venv, other, probe = probe_with_other_libgomp
    mapped = probe["maps_after_import"]
    assert any(m["path"] == str(other / "libgomp.so.1") for m in mapped)  # the loader really took the other copy
    dlopens = [str(p) for p in torch_import_dlopens(site_packages(venv), "311").dlopens]
    dlopens.append(probe["bitsandbytes"]["library_file"])
    places = places_for(venv, tmp_path)

    unaware = resolve_process(probe["executable"], dlopens, env={})
    result = compare_maps(unaware, mapped, places)
    assert result.status == "fail"
    torch_gomp = os.path.realpath(site_packages(venv) / "torch" / "lib" / "libgomp.so.1")
    assert result.evidence["predicted_not_mapped"] == [f"libgomp.so.1 → {torch_gomp}"]

    aware = resolve_process(probe["executable"], dlopens, env={"LD_LIBRARY_PATH": str(other)})
    assert compare_maps(aware, mapped, places).status == "pass"


@pytest.mark.slow
def test_unpredicted_rocm_libraries_warn_from_allowed_places_and_fail_from_elsewhere(
    probe_with_other_libgomp, tmp_path
):
    venv, other, probe = probe_with_other_libgomp
    dlopens = [str(p) for p in torch_import_dlopens(site_packages(venv), "311").dlopens]
    dlopens.append(probe["bitsandbytes"]["library_file"])
    image = resolve_process(probe["executable"], dlopens, env={"LD_LIBRARY_PATH": str(other)})
    places = places_for(venv, tmp_path)
    # What the HSA runtime opens by itself at run time, as /proc/PID/maps would list it (data added to real maps).
    lazy = {"path": f"{places.rocm_dir}/lib/libhsa-amd-aqlprofile64.so.1", "dev": "00:00", "inode": 1}
    warned = compare_maps(image, probe["maps_after_import"] + [lazy], places)
    assert warned.status == "warn" and "libhsa-amd-aqlprofile64.so.1" in warned.reason
    distro = {"path": "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1", "dev": "00:00", "inode": 2}
    failed = compare_maps(image, probe["maps_after_import"] + [distro], places)
    assert failed.status == "fail" and "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1" in failed.reason
