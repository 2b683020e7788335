"""roles/debian/installed_rocm.py: which ROCm a host has, from the InstalledRocm fact's output (facts/InstalledRocm/:
mocks of hosts with AMD's packages, which cannot exist here)."""

from __future__ import annotations

import json
from pathlib import Path

from roles.debian.installed_rocm import parse_installation

FACTS = Path(__file__).parent / "facts"


def _installation(case: str):
    return parse_installation(json.loads((FACTS / "InstalledRocm" / f"{case}.json").read_text())["output"])


def test_complete_install_needs_tree_core_and_meta_package():
    provisioned = _installation("provisioned_noble")
    assert provisioned.is_complete("7.2.4", "70204")
    assert not provisioned.is_complete("7.2.4", "70205")
    without_meta = parse_installation(["tree /opt/rocm-7.2.4 7.2.4-93", "pkg rocm-core 7.2.4.70204-93~24.04 ii "])
    assert not without_meta.is_complete("7.2.4", "70204")
    tree_only = parse_installation(["tree /opt/rocm-7.2.4 7.2.4-93"])
    assert not tree_only.is_complete("7.2.4", "70204")


def test_release_read_from_version_file_else_directory_name():
    found = parse_installation(["tree /opt/rocm-6.4.1 6.4.1-83", "tree /opt/rocm-7.2.4", "tree /opt/rocm-custom"])
    assert [(t.path, t.release) for t in found.trees] == [
        ("/opt/rocm-6.4.1", "6.4.1"),
        ("/opt/rocm-7.2.4", "7.2.4"),
        ("/opt/rocm-custom", ""),
    ]
