"""verify/stack/rocm_release.py and releases/*.json: what a ROCm release is, as data — and that adding a release is
adding its file: the inventory, the colliding-packages stage and the verifier (from the checkout, and installed as a
host has it) pick a new one up with no change to the code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from roles.colliding_packages.data import colliding_packages
from roles.colliding_packages.model import find_collisions
from roles.debian.packages import InstalledPackage
from roles.settings import check_data
from tests.support.drift_images import Workstation
from tests.support.extra_release import extra_release
from tests.support.installed_verifier import install
from tests.support.venvs import REPO
from verify.stack.bnb_library import release_tag
from verify.stack.rocm_release import UnknownRelease, known_releases, rocm_release


def test_every_release_file_agrees_with_the_rules_it_encodes():
    assert known_releases() == ("7.2.4",)
    for name in known_releases():
        release = rocm_release(name)
        major, minor, patch = (int(part) for part in name.split("."))
        assert release.build == str(major * 10000 + minor * 100 + patch), name  # AMD's numbering
        assert release.bitsandbytes_library == f"libbitsandbytes_rocm{release_tag(name)}.so", name  # bitsandbytes'
        assert release.gpu_archs and release.sonames and release.colliding_packages, name


def test_7_2_4_is_what_the_stack_was_pinned_to():
    release = rocm_release("7.2.4")
    assert (release.build, release.amdgpu_driver_release, release.amdgpu_install_revision) == ("70204", "30.30.4", "1")
    assert release.torch_spec == "torch==2.13.0+rocm7.2" and release.torch_index_url.endswith("/whl/rocm7.2")
    assert release.gpu_archs == {
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx1100",
        "gfx1101",
        "gfx1102",
        "gfx1103",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
        "gfx1200",
        "gfx1201",
    }  # no RDNA2 (gfx103x)
    assert {"libhsa-runtime64.so.1", "librocm_smi64.so.1", "libhipblas.so.3"} <= release.sonames
    assert [p.name for p in release.colliding_packages] == ["rocminfo", "hipcc", "rocm-cmake", "rocm-device-libs"]


def test_an_unknown_release_is_refused_naming_the_known_ones(tmp_path: Path):
    with pytest.raises(UnknownRelease, match=r"ROCm 7\.2\.9 is not a release this checkout knows \(known: 7\.2\.4;"):
        rocm_release("7.2.9")
    _, problems = check_data("ws1", {"rocm_release": "7.2.9", "rocm_build": "70209"})
    assert [p.line() for p in problems] == [
        "inventory data of host ws1, key rocm_release (inventory): got '7.2.9', a ROCm release this checkout does "
        "not know — known: 7.2.4 (a release is added as verify/stack/releases/7.2.9.json)"
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "check",
            "--venv",
            str(tmp_path),
            "--expect-rocm",
            "7.2.9",
            "--expect-bitsandbytes",
            "0.50.1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("verify check: --expect-rocm: ROCm 7.2.9 is not a release this checkout knows")


@pytest.fixture
def release_7_2_5():
    """A release file for 7.2.5, for one test. It differs from 7.2.4 where a test can see it: librocm_smi64.so.1 is
    not one of its SONAMEs, and AMD's rocminfo for it is 9.9.9."""
    known = rocm_release("7.2.4")
    with extra_release(
        "7.2.5",
        "70205",
        amdgpu_driver_release="30.30.5",
        sonames=sorted(known.sonames - {"librocm_smi64.so.1"}),
        colliding_packages=[
            {
                "name": p.name,
                "evidence": p.evidence,
                "amd_component_version": "9.9.9" if p.name == "rocminfo" else p.amd_component_version,
            }
            for p in known.colliding_packages
        ],
    ) as data:
        yield data


def _strays(command: list[str], image: Path, release: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [*command, "strays", "--root", str(image), "--expect-rocm", release, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr  # strays found
    return {s["package"]: s["rocm_7_2_sonames"] for s in json.loads(done.stdout)["strays"]}


def test_a_new_release_file_is_picked_up_everywhere_without_code_changes(release_7_2_5, tmp_path: Path):
    assert known_releases() == ("7.2.4", "7.2.5")
    # The inventory accepts it (and refuses a build that does not match its file), and still refuses the unknown.
    settings, problems = check_data("ws1", {"rocm_release": "7.2.5", "rocm_build": "70205"})
    assert problems == () and (settings.rocm_release, settings.rocm_build) == ("7.2.5", "70205")
    _, problems = check_data("ws1", {"rocm_release": "7.2.5", "rocm_build": "70204"})
    assert [p.key for p in problems] == ["rocm_build"]
    _, problems = check_data("ws1", {"rocm_release": "7.2.6", "rocm_build": "70206"})
    assert "known: 7.2.4, 7.2.5 " in problems[0].detail
    # The colliding-packages stage reads its table: Debian 12's rocminfo sorts below AMD's 9.9.9 for 7.2.5.
    rocminfo = {"rocminfo": InstalledPackage("rocminfo", "5.2.3-2", "ii ")}
    assert [c.amd_version for c in find_collisions(rocminfo, "70204")] == ["1.0.0.70204"]
    assert find_collisions(rocminfo, "70205") == () and colliding_packages("70205")[0].amd_component_version == "9.9.9"
    # The verifier, from this checkout and installed as a host has it (root's only: run as root), judges against it.
    image = Workstation.provisioned(tmp_path / "ws")
    image.distro_rocm_smi()  # librocm-smi64-1 ships librocm_smi64.so.1: a SONAME of 7.2.4's, not of this 7.2.5's
    checkout = [sys.executable, "-m", "verify"]
    assert _strays(checkout, image.root, "7.2.4")["librocm-smi64-1"] == ["librocm_smi64.so.1"]
    assert _strays(checkout, image.root, "7.2.5")["librocm-smi64-1"] == []
    if os.geteuid() != 0:
        return
    top = install(tmp_path / "verifier")
    host_python = ["/usr/bin/python3", "-I", "-S", str(top / "launcher.py")]
    assert _strays(host_python, image.root, "7.2.5")["librocm-smi64-1"] == []
    done = subprocess.run(
        [
            *host_python,
            "check",
            "--venv",
            "/opt/rocm-fleet/venv",
            "--root",
            str(image.root),
            "--expect-rocm",
            "7.2.5",
            "--expect-bitsandbytes",
            "0.50.1",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    report = json.loads(done.stdout)
    assert report["request"]["expect_rocm"] == "7.2.5" and done.returncode == 1
    versions = next(c for c in report["checks"] if c["id"] == "versions.rocm")
    assert versions["reason"].startswith("system ROCm is not 7.2.5: /opt/rocm/.info/version says 7.2.4")


def test_amds_apt_repository_and_folder_of_7_2_4():
    """What the apt.pin check and the ROCm stage's pin read (issue 11), and AMD's folder naming."""
    release = rocm_release("7.2.4")
    assert release.apt.origin == "repo.radeon.com" and release.apt.pin_priority == 600
    assert release.apt.pin_files == (
        "/etc/apt/preferences.d/repo-radeon-pin-600",
        "/etc/apt/preferences.d/rocm-pin-600",
    )
    assert release.folder == "7.2.4"
    assert replace(release, release="7.2.0").folder == "7.2"
