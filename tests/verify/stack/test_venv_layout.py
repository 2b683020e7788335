"""verify/stack/venv_layout.py: finding a venv and reading what pip recorded, without importing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.venvs import site_packages
from tests.support.verify_runs import torch_cpu_venv
from verify.stack.venv_layout import VenvError, dist_version, find_venv, torch_version_module


@pytest.mark.slow
def test_real_venv_versions_and_torch_version_module():
    venv = find_venv(torch_cpu_venv())
    assert venv.site_packages == site_packages(torch_cpu_venv())
    assert dist_version(venv.site_packages, "torch") == "2.13.0+cpu"
    assert dist_version(venv.site_packages, "BitsAndBytes") == "0.50.1"
    assert dist_version(venv.site_packages, "no-such-thing") is None
    constants = torch_version_module(venv.site_packages)
    assert constants["__version__"] == "2.13.0+cpu" and constants["hip"] is None


def test_not_a_venv_is_a_usage_error_naming_the_path(tmp_path: Path):
    with pytest.raises(VenvError, match=f"{tmp_path}: not a venv"):
        find_venv(tmp_path)
    (tmp_path / "pyvenv.cfg").write_text("")
    with pytest.raises(VenvError, match="no bin/python"):
        find_venv(tmp_path)
