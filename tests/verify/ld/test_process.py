"""verify/ld/process.py against ground truth: a real `import torch, bitsandbytes` (torch 2.13.0 CPU + the real
bitsandbytes 0.50.1 wheel, the torch-cpu venv).

The subprocess runs with LD_DEBUG=files, which prints every dlopen() that maps a new object together with its caller;
that sequence is fed to the model, and the set of ELF files the model predicts must equal the set /proc/self/maps shows
after the imports. The per-file view (ldd) gets libgomp wrong here; the process model must not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verify.ld import image as m
from verify.ld.process import Analyser, Dlopen

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]

_DLOPEN = re.compile(r"file=(\S+) \[0\];\s+dynamically loaded by (.+?) \[0\]")


@pytest.fixture(scope="module")
def venv():
    from tests.support.venvs import TORCH_CPU, ensure_venv

    return ensure_venv("torch-cpu", TORCH_CPU)


def import_and_observe(python, statement: str) -> tuple[list[Dlopen], set[str]]:
    code = f"{statement}\nprint(open('/proc/self/maps').read())"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_DEBUG": "files", "HOME": os.environ.get("HOME", "/")}
    result = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    dlopens = []
    for name, caller in _DLOPEN.findall(result.stderr):
        dlopens.append(Dlopen(name, None if caller.startswith("<") or not caller.startswith("/") else caller))
    mapped = set()
    for line in result.stdout.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/") and not fields[5].endswith("(deleted)"):
            mapped.add(fields[5])
    return dlopens, {path for path in mapped if _is_elf(path)}


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


@pytest.fixture(scope="module")
def observed(venv):
    return import_and_observe(venv / "bin" / "python", "import torch, bitsandbytes")


@pytest.fixture(scope="module")
def model(venv, observed):
    dlopens, _ = observed
    return Analyser().resolve_process(str(venv / "bin" / "python"), dlopens)


def test_predicted_objects_equal_what_the_process_maps(observed, model):
    _, mapped = observed
    predicted = {os.path.realpath(o.path) for o in model.objects}
    assert predicted == mapped, (
        f"only predicted: {sorted(predicted - mapped)}\nonly mapped: {sorted(mapped - predicted)}"
    )
    assert len(mapped) > 50 and not model.missing


def test_bitsandbytes_libgomp_binds_to_torchs_copy(venv, model):
    from tests.support.venvs import site_packages

    site = site_packages(venv)
    bnb = str(site / "bitsandbytes" / "libbitsandbytes_cpu.so")
    torch_gomp = os.path.realpath(site / "torch" / "lib" / "libgomp.so.1")
    bound = [
        r
        for r in model.requests
        if r.name == "libgomp.so.1" and r.requester and os.path.realpath(r.requester) == os.path.realpath(bnb)
    ]
    assert bound, "the model never loaded bitsandbytes' CPU library"
    assert bound[0].outcome == m.ALREADY_LOADED and os.path.realpath(bound[0].path) == torch_gomp
    alone = Analyser().resolve(bnb)  # what ldd says for the file on its own
    per_file = alone.requests_for("libgomp.so.1")[0]
    assert per_file.outcome == m.LOADED and os.path.realpath(per_file.path) != torch_gomp


def test_process_subcommand_shows_the_binding(venv, observed):
    """The CLI on the same sequence (callers given with --dlopen-from) reports the libgomp binding in its JSON."""
    import json

    dlopens, _ = observed
    argv = [
        sys.executable,
        "-m",
        "verify",
        "process",
        "--exe",
        str(venv / "bin" / "python"),
        "--json",
        "--library-path",
        "",
    ]
    for call in dlopens:
        argv += ["--dlopen-from", call.caller, call.name] if call.caller else ["--dlopen", call.name]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    gomp = [r for r in document["requests"] if r["name"] == "libgomp.so.1" and "bitsandbytes" in (r["requester"] or "")]
    assert gomp and gomp[0]["outcome"] == "already loaded" and "torch/lib/libgomp.so.1" in gomp[0]["path"]
