"""The installed verifier under each python3 a workstation may have: Ubuntu 22.04's 3.10, Debian 12's 3.11 (this
machine's /usr/bin/python3, what every other test runs), Ubuntu 24.04's 3.12, and 3.13.

A host installs the verifier with its own interpreter (compiled by it) and runs `python3 -I -S launcher.py …` with it,
so each must install it, hold it to the launcher's rule and give the same answer: the same report, fact for fact, but
`host.python`, on a provisioned stand-in image and on one a dpkg run changed (strays, a library now found elsewhere).

The interpreters: tests/support/host_pythons.py (pyenv's builds; Debian 12 packages only 3.11). Under the same
interpreters: the status fact in tests/roles/status/test_facts.py, the venv's facts in tests/roles/venv/test_facts.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.drift_images import Workstation
from tests.support.host_pythons import DEBIAN_PYTHON3, OTHER_PYTHONS, interpreter
from tests.support.installed_verifier import install, launch, version

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the verifier is root's only")]


def installed(tmp_path_factory, python: str) -> Path:
    """The verifier installed by `python` (compiled by it) in a directory of root's, as on a host."""
    return install(tmp_path_factory.mktemp("host") / "verifier", python=python)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    provisioned = Workstation.provisioned(tmp_path_factory.mktemp("provisioned") / "ws")
    drifted = Workstation.provisioned(tmp_path_factory.mktemp("drifted") / "ws")
    drifted.distro_rocm_smi()  # Debian's librocm-smi64-1 and what came with it: strays, and a library found elsewhere
    return {"provisioned": provisioned.root, "drifted": drifted.root}


def check(python: str, top: Path, root: Path) -> tuple[dict, int]:
    done = launch(
        top,
        *("check", "--root", str(root), "--venv", "/opt/rocm-fleet/venv", "--expect-rocm", "7.2.4"),
        *("--expect-bitsandbytes", "0.50.1", "--json"),
        python=python,
    )
    assert done.stdout.startswith("{"), done.stderr
    return json.loads(done.stdout), done.returncode


def comparable(report: dict) -> dict:
    return {**report, "generated_at": None, "host": {**report["host"], "python": None}}


@pytest.fixture(scope="module")
def debian_reports(tmp_path_factory, images) -> dict[str, tuple[dict, int]]:
    top = installed(tmp_path_factory, DEBIAN_PYTHON3)
    return {name: check(DEBIAN_PYTHON3, top, root) for name, root in images.items()}


def test_debian_python3_gives_the_two_verdicts_the_other_pythons_are_held_to(debian_reports):
    statuses = {name: {c["id"]: c["status"] for c in report["checks"]} for name, (report, _) in debian_reports.items()}
    # The provisioned image warns (torch's own HIP beside ROCm's, in one process: the real wheel's layout).
    assert (debian_reports["provisioned"][0]["verdict"], debian_reports["provisioned"][1]) == ("warn", 0)
    assert statuses["provisioned"]["strays"] == "pass"
    assert (debian_reports["drifted"][0]["verdict"], debian_reports["drifted"][1]) == ("fail", 1), statuses["drifted"]
    assert statuses["drifted"]["strays"] != "pass" and statuses["drifted"]["linkage.static"] == "fail"


@pytest.mark.parametrize("minor", sorted(OTHER_PYTHONS))
def test_each_hosts_python3_installs_it_and_writes_the_report_debians_writes(
    minor, tmp_path_factory, images, debian_reports
):
    python = interpreter(minor)
    top = installed(tmp_path_factory, python)
    tag = f"cpython-{minor.replace('.', '')}"
    assert launch(top, "--check", str(top / version()), version(), python=python).stdout == "intact\n"
    assert list((top / version() / "verify" / "__pycache__").glob(f"cli.{tag}.pyc")), "compiled by that python3"
    for name, root in images.items():
        report, code = check(python, top, root)
        assert report["host"]["python"].startswith(f"{minor}.")
        expected, expected_code = debian_reports[name]
        assert (name, code, comparable(report)) == (name, expected_code, comparable(expected))
