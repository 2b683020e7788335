"""roles/venv/facts.py: each fact's shell text run for real on this machine, and its output parsed."""

from __future__ import annotations

import os
import platform
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from roles.venv.facts import HostPython3, VenvContents
from roles.venv.model import HostPython, VenvState


def run_fact(fact, env=None, **arguments):
    done = subprocess.run(["/bin/sh", "-c", fact.command(**arguments)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return fact.process(done.stdout.splitlines())


def test_host_python3_of_this_machine():
    found = run_fact(HostPython3())
    version = subprocess.run(["python3", "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert found == HostPython(version, os.confstr("CS_GNU_LIBC_VERSION").split()[1], platform.machine())


def test_host_without_python3_says_none():
    assert run_fact(HostPython3(), env={"PATH": "/nonexistent"}) is None


def test_host_python3_refuses_a_non_glibc_system():
    with pytest.raises(FactProcessError, match="not a glibc system"):
        HostPython3().process(['{"version": "3.12.1", "glibc": null, "machine": "x86_64"}'])


def test_venv_contents_of_a_fresh_venv(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    found = run_fact(VenvContents(), path=str(tmp_path / "v"))
    assert isinstance(found, VenvState)
    assert found.python == platform.python_version()
    assert found.owner == pwd.getpwuid(os.getuid()).pw_name
    assert "torch" not in found.packages


def test_venv_contents_absent_and_broken(tmp_path):
    assert run_fact(VenvContents(), path=str(tmp_path / "nothing")) is None
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = tmp_path / "v" / "bin" / "python"
    python.unlink()
    python.symlink_to("/usr/bin/python3.0-gone")  # the interpreter the venv was made from was removed
    assert run_fact(VenvContents(), path=str(tmp_path / "v")) == "broken"


def test_venv_contents_path_with_a_space(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "a venv")], check=True)
    assert isinstance(run_fact(VenvContents(), path=str(tmp_path / "a venv")), VenvState)


@pytest.mark.slow
def test_venv_contents_sees_local_version_labels():
    from tests.support.venvs import TORCH_CPU, ensure_venv

    venv = ensure_venv("torch-cpu", TORCH_CPU)
    found = run_fact(VenvContents(), path=str(venv))
    assert found.packages["torch"] == "2.13.0+cpu"  # the label pyinfra's pip fact drops
    assert found.packages["bitsandbytes"] == "0.50.1"
    assert found.owner == pwd.getpwuid(Path(venv).stat().st_uid).pw_name


def test_unreadable_output_is_a_fact_error():
    with pytest.raises(FactProcessError, match="unreadable output"):
        VenvContents().process(["Traceback (most recent call last):"])
