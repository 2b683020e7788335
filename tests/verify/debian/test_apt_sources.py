"""verify/debian/apt_sources.py and the lists judgement of verify/checks/apt.py: AMD's lists as amdgpu-install writes
them, as a distribution upgrade leaves them (commented out, "disabled on upgrade to noble"), and in deb822 form."""

from __future__ import annotations

from dataclasses import replace

from verify.checks.apt import judge_lists
from verify.debian.apt_sources import amd_entries, parse_sources_file
from verify.report.report import FAIL, PASS
from verify.stack.rocm_release import rocm_release

RELEASE = rocm_release("7.2.4")

ROCM_LIST = """deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/7.2.4 noble main
deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/graphics/7.2.4/ubuntu noble main
"""
AMDGPU_LIST = (
    "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/amdgpu/30.30.4/ubuntu noble main\n"
)
# What do-release-upgrade leaves of a third-party list (jammy → noble).
DISABLED = (
    "# deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/7.2.4 jammy main"
    " # disabled on upgrade to noble\n"
    "# deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/graphics/7.2.4/ubuntu jammy"
    " main # disabled on upgrade to noble\n"
)
DEB822 = """Types: deb
URIs: https://repo.radeon.com/rocm/apt/7.2.4 https://repo.radeon.com/graphics/7.2.4/ubuntu
Suites: noble
Components: main
Signed-By: /etc/apt/keyrings/rocm.gpg

Types: deb
URIs: https://repo.radeon.com/amdgpu/30.30.4/ubuntu
Suites: noble
Components: main
Enabled: no
"""
UBUNTU = "deb http://archive.ubuntu.com/ubuntu noble main restricted universe\n"


def _entries(**files):
    return [e for name, text in files.items() for e in parse_sources_file(text, name.replace("_", ".", 1))]


def test_amdgpu_installs_lists_point_at_the_release():
    entries = _entries(**{"rocm_list": ROCM_LIST, "amdgpu_list": AMDGPU_LIST, "ubuntu_list": UBUNTU})
    assert [e.amd_repository for e in amd_entries(tuple(entries))] == [
        ("rocm/apt", "7.2.4"),
        ("graphics", "7.2.4"),
        ("amdgpu", "30.30.4"),
    ]
    result = judge_lists(entries, RELEASE, [])
    assert result.status == PASS, result.reason


def test_lists_a_distribution_upgrade_disabled_fail_with_the_fix():
    result = judge_lists(_entries(**{"rocm_list": DISABLED, "amdgpu_list": AMDGPU_LIST}), RELEASE, [])
    assert result.status == FAIL
    assert result.reason == (
        "rocm/apt/7.2.4 is disabled: https://repo.radeon.com/rocm/apt/7.2.4 jammy (disabled: disabled on upgrade to "
        "noble) in rocm.list:1 (also: graphics/7.2.4/ubuntu is disabled: https://repo.radeon.com/graphics/7.2.4/ubuntu"
        " jammy (disabled: disabled on upgrade to noble) in rocm.list:2) — run pyinfra INVENTORY tasks/rocm.py (it "
        "rewrites AMD's lists)"
    )


def test_lists_of_another_release_and_a_disabled_deb822_stanza():
    older = ROCM_LIST.replace("7.2.4", "7.2.1")
    result = judge_lists(_entries(**{"rocm_list": older, "rocm_sources": DEB822.split("\n\n")[1]}), RELEASE, [])
    assert result.status == FAIL
    assert result.reason.startswith(
        "rocm/apt/7.2.4 is missing; the list names https://repo.radeon.com/rocm/apt/7.2.1 instead (rocm.list:1)"
    )
    assert "amdgpu/<driver>/ubuntu is disabled" in result.reason
    assert judge_lists(_entries(**{"rocm_sources": DEB822.replace("Enabled: no\n", "")}), RELEASE, []).status == PASS


def test_a_dot_zero_release_uses_amds_short_folder():
    lists = ROCM_LIST.replace("7.2.4", "7.2") + AMDGPU_LIST
    assert judge_lists(_entries(**{"rocm_list": lists}), replace(RELEASE, release="7.2.0"), []).status == PASS
