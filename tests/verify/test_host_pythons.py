"""The verifier archive run by each python3 a workstation may have: Ubuntu 22.04's 3.10, Debian 12's 3.11 (this
machine's /usr/bin/python3, what every other test runs), Ubuntu 24.04's 3.12, and 3.13.

A host runs `python3 -I -S verify.pyz …` with its own interpreter, so the verifier must give the same answer under
each: the same report, fact for fact, but `host.python`, on a provisioned stand-in image and on one a dpkg run
changed (strays, a library now found elsewhere).

The interpreters: tests/support/host_pythons.py (pyenv's builds; Debian 12 packages only 3.11). Under the same
interpreters: the compiled-code cache (an entry per interpreter, each taking only its own) in
tests/verify/test_bytecode_cache.py; the facts' own programs in tests/roles/status/test_facts.py and
tests/roles/venv/test_facts.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from roles.verifier import zipapp_bytes
from tests.support.drift_images import Workstation
from tests.support.host_pythons import DEBIAN_PYTHON3, OTHER_PYTHONS, interpreter

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the cache is root's only")]


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """verify.pyz in a directory of root's, mode 0755, as on a host (/var/lib/rocm-fleet)."""
    directory = tmp_path_factory.mktemp("host") / "rocm-fleet"
    directory.mkdir(mode=0o755)
    (directory / "verify.pyz").write_bytes(zipapp_bytes())
    return directory / "verify.pyz"


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    provisioned = Workstation.provisioned(tmp_path_factory.mktemp("provisioned") / "ws")
    drifted = Workstation.provisioned(tmp_path_factory.mktemp("drifted") / "ws")
    drifted.distro_rocm_smi()  # Debian's librocm-smi64-1 and what came with it: strays, and a library found elsewhere
    return {"provisioned": provisioned.root, "drifted": drifted.root}


def check(python: str, archive: Path, root: Path) -> tuple[dict, int]:
    done = subprocess.run(
        [
            python,
            "-I",
            "-S",
            str(archive),
            "check",
            "--root",
            str(root),
            "--venv",
            "/opt/rocm-fleet/venv",
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    assert done.stdout.startswith("{"), done.stderr
    return json.loads(done.stdout), done.returncode


def comparable(report: dict) -> dict:
    return {**report, "generated_at": None, "host": {**report["host"], "python": None}}


@pytest.fixture(scope="module")
def debian_reports(archive, images) -> dict[str, tuple[dict, int]]:
    return {name: check(DEBIAN_PYTHON3, archive, root) for name, root in images.items()}


def test_debian_python3_gives_the_two_verdicts_the_other_pythons_are_held_to(debian_reports):
    statuses = {name: {c["id"]: c["status"] for c in report["checks"]} for name, (report, _) in debian_reports.items()}
    # The provisioned image warns (torch's own HIP beside ROCm's, in one process: the real wheel's layout).
    assert (debian_reports["provisioned"][0]["verdict"], debian_reports["provisioned"][1]) == ("warn", 0)
    assert statuses["provisioned"]["strays"] == "pass"
    assert (debian_reports["drifted"][0]["verdict"], debian_reports["drifted"][1]) == ("fail", 1), statuses["drifted"]
    assert statuses["drifted"]["strays"] != "pass" and statuses["drifted"]["linkage.static"] == "fail"


@pytest.mark.parametrize("version", sorted(OTHER_PYTHONS))
def test_each_hosts_python3_writes_the_report_debians_writes(version, archive, images, debian_reports):
    python = interpreter(version)
    for name, root in images.items():
        report, code = check(python, archive, root)
        assert report["host"]["python"].startswith(f"{version}.")
        expected, expected_code = debian_reports[name]
        assert (name, code, comparable(report)) == (name, expected_code, comparable(expected))
