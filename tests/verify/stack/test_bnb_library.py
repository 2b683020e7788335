"""verify/stack/bnb_library.py: which native library bitsandbytes 0.50.1 loads — checked against bitsandbytes' own code.

The oracle is the real wheel's `cextension.get_cuda_bnb_library_path`, run in the torch-cpu venv for each case with
`torch.version.hip` set to the case's value (the CPU torch has none: that attribute is the mocked boundary) and the
real packaged libraries of the wheel to choose from.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.venvs import site_packages
from tests.support.verify_runs import torch_cpu_venv
from verify.stack.bnb_library import hip_version_tuple, packaged_rocm_libraries, release_tag, select_bnb_library
from verify.stack.rocm_release import rocm_release

R724 = rocm_release("7.2.4")

CASES = [
    # (torch.version.hip, BNB_ROCM_VERSION or None)
    ("7.2.53211-c6ad5c8c8", None),  # exact: rocm72
    ("7.3.0", None),  # no 7.3 build: highest lower same-major, 7.2
    ("7.20.1", None),  # "714" is 7.14, lower than 7.20: rocm714
    ("6.2.41133", None),  # no lower 6.x than 6.4: lowest higher, rocm64
    ("6.5.0", None),  # rocm64 (lower)
    ("8.0.0", None),  # no same major: the exact, missing, name
    ("7.2.53211", "71"),  # override wins, no fallback
    ("7.2.53211", "99"),  # override naming a build that is not there
    ("7.2.53211", "7.2"),  # not digits: bitsandbytes raises
]

ORACLE = r"""
import json, os, sys
import torch
from bitsandbytes import cextension, cuda_specs
results = []
for hip, override in json.loads(sys.argv[1]):
    torch.version.hip = hip
    cuda_specs.get_cuda_version_tuple.cache_clear()
    if override is None:
        os.environ.pop("BNB_ROCM_VERSION", None)
    else:
        os.environ["BNB_ROCM_VERSION"] = override
    version = cuda_specs.get_cuda_version_tuple()
    specs = cuda_specs.CUDASpecs((11, 0), cuda_specs.get_cuda_version_string(), version)
    try:
        path = cextension.get_cuda_bnb_library_path(specs)
        results.append({"name": path.name, "exists": path.exists(), "error": None})
    except RuntimeError as error:
        results.append({"name": None, "exists": False, "error": str(error)})
print(json.dumps(results))
"""


@pytest.mark.slow
def test_selection_matches_bitsandbytes_own_code_on_the_real_wheel():
    venv = torch_cpu_venv()
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", ORACLE, json.dumps(CASES)], capture_output=True, text=True, check=True
    )
    oracle = json.loads(done.stdout.strip().splitlines()[-1])
    package = site_packages(venv) / "bitsandbytes"
    for (hip, override), want in zip(CASES, oracle):
        env = {} if override is None else {"BNB_ROCM_VERSION": override}
        choice = select_bnb_library(package, hip, env, R724)
        if want["error"]:
            assert choice.error, (hip, override, want)
            continue
        assert choice.error is None, (hip, override, choice)
        assert choice.name == want["name"], (hip, override, want, choice)
        assert choice.path.exists() == want["exists"], (hip, override)
        # bitsandbytes warns exactly when it falls back to a neighbouring build.
        exact = hip_version_tuple(hip) in packaged_rocm_libraries(package)
        assert (choice.warning is not None) == (override is None and not exact and want["exists"]), (hip, choice)


def test_torch_without_hip_gets_the_library_of_the_expected_release(tmp_path: Path):
    choice = select_bnb_library(tmp_path, None, {}, R724)
    assert choice.name == "libbitsandbytes_rocm72.so" and "not a ROCm build" in choice.rule
    assert release_tag("6.4.3") == "64" and release_tag("7.14.0") == "714"


def test_unreadable_hip_version_is_an_error_not_a_guess(tmp_path: Path):
    assert hip_version_tuple("7") is None and hip_version_tuple("seven.two") is None
    assert select_bnb_library(tmp_path, "7", {}, R724).error
