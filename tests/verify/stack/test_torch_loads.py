"""verify/stack/torch_loads.py: what `import torch` dlopens itself — checked against the real loader with
LD_DEBUG=files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.venvs import site_packages
from tests.support.verify_runs import torch_cpu_venv
from verify.stack.torch_loads import torch_import_dlopens


def dlopened_under(directory: Path, venv: Path) -> list[str]:
    """Files below `directory` that the real loader reports as "dynamically loaded" during `import torch`."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_DEBUG": "files"}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, text=True, env=env, check=True
    )
    opened = re.findall(r"file=(\S+) \[0\];\s+dynamically loaded by", done.stderr)
    real = os.path.realpath(directory)
    return [path for path in opened if os.path.realpath(path).startswith(real + "/")]


@pytest.mark.slow
def test_the_model_lists_exactly_what_import_torch_dlopens_in_order():
    venv = torch_cpu_venv()
    site = site_packages(venv)
    loads = torch_import_dlopens(site, "311")
    assert [p.name for p in loads.dlopens] == ["libtorch_global_deps.so", "_C.cpython-311-x86_64-linux-gnu.so"]
    assert [os.path.realpath(p) for p in loads.dlopens] == [
        os.path.realpath(p) for p in dlopened_under(site / "torch", venv)
    ]
    assert loads.notes == ()


def test_rocm_runtime_wheel_init_and_disabled_global_deps_are_noticed(tmp_path: Path):
    """A torch tree built here (file layout only) for the variants the real wheel does not have."""
    torch = tmp_path / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "lib" / "libtorch_global_deps.so").write_bytes(b"")
    (torch / "_C.cpython-310-x86_64-linux-gnu.so").write_bytes(b"")
    (torch / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (torch / "_rocm_init.py").write_text("def initialize(): pass\n")
    (torch / "_utils_internal.py").write_text("USE_GLOBAL_DEPS = False\n")
    loads = torch_import_dlopens(tmp_path, "311")
    assert [p.name for p in loads.dlopens] == ["_C.cpython-311-x86_64-linux-gnu.so"]
    assert any("_rocm_init.py" in note for note in loads.notes)
    (torch / "_C.cpython-311-x86_64-linux-gnu.so").unlink()
    (torch / "_C.cpython-310-x86_64-linux-gnu.so").unlink()
    assert any("cannot work" in note for note in torch_import_dlopens(tmp_path, "311").notes)
