"""The analyser against glibc's ldd on real libraries: every shared library in /usr/lib/x86_64-linux-gnu, Python's own
extension modules, every library in the real bitsandbytes 0.50.1 wheel and torch's (torch-cpu venv).

ldd lines are compared whole (name, path, order, "not found"), addresses and the vDSO aside. Files ldd itself refuses
(it runs the loader's --verify first) are counted, and must stay a small minority.
"""

from __future__ import annotations

import glob
import os
import sysconfig
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.elfbuild import real_ldd
from verify.ld.elf import ElfError
from verify.ld.lddview import ldd_lines
from verify.ld.process import Analyser


def compare_with_ldd(paths: list[str]) -> tuple[int, list[str]]:
    """(number compared, differences); one Analyser for all, as a real run over many files would use."""
    analyser = Analyser()
    unique = list(dict.fromkeys(os.path.realpath(p) for p in paths))
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(real_ldd, unique))
    compared, differences = 0, []
    for path, (expected, raw) in zip(unique, answers):
        try:
            mine = ldd_lines(analyser.resolve(path))
        except ElfError:
            continue  # not ELF (linker scripts, data): ldd refuses these too
        if raw.returncode != 0 and not expected:
            continue  # ldd refused the file ("not a dynamic executable"): nothing to compare
        compared += 1
        if mine != expected:
            differences.append(f"{path}:\n  ldd:      {expected}\n  analyser: {mine}")
    return compared, differences


def shared_objects(pattern: str) -> list[str]:
    return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))


@pytest.mark.slow
def test_every_library_in_the_multiarch_directory():
    paths = shared_objects("/usr/lib/x86_64-linux-gnu/*.so*")
    compared, differences = compare_with_ldd(paths)
    assert not differences, "\n".join(differences[:10])
    assert compared > 0.8 * len(set(map(os.path.realpath, paths))) - 20


def test_pythons_own_extension_modules():
    # The running interpreter's (DESTSHARED is its lib-dynload, also from inside a venv) and the system python3's.
    paths = shared_objects(os.path.join(sysconfig.get_config_var("DESTSHARED") or "/nonexistent", "*.so"))
    paths += shared_objects("/usr/lib/python3*/lib-dynload/*.so")
    assert paths, "no lib-dynload extension modules found"
    compared, differences = compare_with_ldd(paths)
    assert not differences, "\n".join(differences[:10])
    assert compared >= len(paths) * 0.9


@pytest.fixture(scope="module")
def torch_cpu_site():
    from tests.support.venvs import TORCH_CPU, ensure_venv, site_packages

    return site_packages(ensure_venv("torch-cpu", TORCH_CPU))


@pytest.mark.slow
def test_every_library_in_the_bitsandbytes_wheel(torch_cpu_site):
    paths = shared_objects(str(torch_cpu_site / "bitsandbytes" / "*.so"))
    assert any(p.endswith("libbitsandbytes_rocm72.so") for p in paths)
    compared, differences = compare_with_ldd(paths)
    assert not differences, "\n".join(differences[:10])
    assert compared == len(paths)
    rocm = Analyser().resolve(str(torch_cpu_site / "bitsandbytes" / "libbitsandbytes_rocm72.so"))
    missing = {r.name for r in rocm.missing}
    assert {"libhipblas.so.3", "libhipblaslt.so.1"} <= missing  # no ROCm here: the very trap the project checks
    hipblas = rocm.requests_for("libhipblas.so.3")[0]
    assert "RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib of" in hipblas.describe()


@pytest.mark.slow
def test_every_library_of_torch(torch_cpu_site):
    paths = shared_objects(str(torch_cpu_site / "torch" / "lib" / "*.so*")) + shared_objects(
        str(torch_cpu_site / "torch" / "*.so")
    )
    compared, differences = compare_with_ldd(paths)
    assert not differences, "\n".join(differences[:10])
    assert compared == len(set(map(os.path.realpath, paths)))
