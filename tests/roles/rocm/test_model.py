"""roles/rocm/model.py: AMD's file names and URLs, what to do with the installed ROCm or another release, and the apt
lists amdgpu-install writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roles.debian.installed_rocm import parse_installation
from roles.rocm.model import (
    AMDGPU_LIST,
    ROCM_LIST,
    check_repositories,
    installer_file_name,
    installer_url,
    parse_list_entries,
    plan_rocm,
    release_folder,
)

FACTS = Path(__file__).parents[1] / "debian" / "facts"  # InstalledRocm's cases: a fact every stage may read


def _installation(case: str):
    return parse_installation(json.loads((FACTS / "InstalledRocm" / f"{case}.json").read_text())["output"])


def test_installer_url_for_a_patch_release_and_for_an_x_y_0_release():
    # AMD's documented URLs (ROCm/rocm-install-on-linux; its docs for 7.2.0 drop the .0 in folder and file name).
    assert installer_url("https://repo.radeon.com", "7.2.4", "70204", "noble") == (
        "https://repo.radeon.com/amdgpu-install/7.2.4/ubuntu/noble/amdgpu-install_7.2.4.70204-1_all.deb"
    )
    assert installer_url("https://repo.radeon.com/", "7.2.0", "70200", "jammy") == (
        "https://repo.radeon.com/amdgpu-install/7.2/ubuntu/jammy/amdgpu-install_7.2.70200-1_all.deb"
    )
    assert installer_file_name("6.3.4", "60304") == "amdgpu-install_6.3.4.60304-1_all.deb"
    assert release_folder("30.30.0") == "30.30"


def test_plan_fresh_installed_and_other_release():
    assert plan_rocm(parse_installation([]), "7.2.4", "70204", "stop").action == "install"
    assert plan_rocm(_installation("provisioned_noble"), "7.2.4", "70204", "stop").action == "none"
    assert plan_rocm(_installation("two_releases_multi_version"), "7.2.4", "70204", "stop").action == "none"


SINGLE_6_4 = [
    "tree /opt/rocm-6.4.1 6.4.1-83",
    "opt-rocm /opt/rocm-6.4.1",
    "pkg rocm-core 6.4.1.60401-83~24.04 ii ",
    "pkg rocm 6.4.1.60401-83~24.04 ii ",
]
MULTI_6_4 = [
    "tree /opt/rocm-6.4.1 6.4.1-83",
    "opt-rocm /opt/rocm-6.4.1",
    "pkg rocm-core6.4.1 6.4.1.60401-83~24.04 ii ",
    "pkg rocm6.4.1 6.4.1.60401-83~24.04 ii ",
]


def test_other_release_with_stop_names_it_and_both_ways_out():
    plan = plan_rocm(parse_installation(SINGLE_6_4), "7.2.4", "70204", "stop")
    assert (plan.action, plan.reason) == (
        "stop",
        (
            "another ROCm release is installed: 6.4.1 (/opt/rocm-6.4.1); rocm_other_release is 'stop': uninstall it "
            "(sudo amdgpu-install --uninstall --rocmrelease=all) or set rocm_other_release: side-by-side"
        ),
    )


def test_side_by_side_beside_a_multi_version_install():
    plan = plan_rocm(parse_installation(MULTI_6_4), "7.2.4", "70204", "side-by-side")
    assert (plan.action, plan.side_by_side) == ("install", True)


def test_side_by_side_refused_beside_a_single_version_install():
    # AMD: single-version and multi-version packages cannot be installed together.
    plan = plan_rocm(parse_installation(SINGLE_6_4), "7.2.4", "70204", "side-by-side")
    assert plan.action == "stop"
    assert plan.reason.startswith("ROCm 6.4.1 is a single-version install (package rocm-core)")


def test_upgrade_in_place_of_a_removed_release_is_an_install():
    # Only config files of an old rocm-core left ("rc"): nothing of it is installed.
    leftovers = parse_installation(["pkg rocm-core 6.4.1.60401-83~24.04 rc "])
    assert leftovers.releases() == ()
    assert plan_rocm(leftovers, "7.2.4", "70204", "stop").action == "install"


NOBLE = {
    ROCM_LIST: (
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/7.2.4 noble main\n"
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] "
        "https://repo.radeon.com/graphics/7.2.4/ubuntu noble main\n"
    ),
    AMDGPU_LIST: (
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] "
        "https://repo.radeon.com/amdgpu/30.30.4/ubuntu noble main\n"
    ),
}


def test_lists_as_expected_pass_with_comments_and_trailing_slashes():
    lists = dict(NOBLE)
    lists[AMDGPU_LIST] = "# amdgpu\n" + lists[AMDGPU_LIST].replace("ubuntu noble", "ubuntu/ noble")
    assert check_repositories(lists, "https://repo.radeon.com", "7.2.4", "30.30.4", "noble").ok


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda ls: {**ls, ROCM_LIST: ls[ROCM_LIST].replace("7.2.4", "7.2.1")}, "rocm.list: unexpected"),
        (lambda ls: {**ls, AMDGPU_LIST: ls[AMDGPU_LIST].replace("30.30.4", "30.30.1")}, "amdgpu.list: unexpected"),
        (lambda ls: {**ls, ROCM_LIST: ls[ROCM_LIST].splitlines()[0] + "\n"}, "rocm.list: lacks"),
        (lambda ls: {k: v.replace("noble", "jammy") for k, v in ls.items()}, "rocm.list: unexpected"),
        (lambda ls: {ROCM_LIST: ls[ROCM_LIST]}, "amdgpu.list is missing"),
        (
            lambda ls: {**ls, ROCM_LIST: ls[ROCM_LIST] + "deb https://repo.radeon.com/rocm/apt/6.4 noble main\n"},
            "rocm.list: unexpected https://repo.radeon.com/rocm/apt/6.4 noble",
        ),
    ],
)
def test_wrong_lists_are_named_and_rewritten_keeping_the_keyring(change, problem):
    check = check_repositories(change(NOBLE), "https://repo.radeon.com", "7.2.4", "30.30.4", "noble")
    assert not check.ok
    assert any(problem in p for p in check.problems), check.problems
    for path, text in check.rewrites.items():
        # The rewrite is exactly what passes the check.
        assert check_repositories({**NOBLE, path: text}, "https://repo.radeon.com", "7.2.4", "30.30.4", "noble").ok
        assert all("signed-by=/etc/apt/keyrings/rocm.gpg" in e.options for e in parse_list_entries(text))


@pytest.mark.parametrize(
    "option",
    [
        "trusted=yes",
        "allow-insecure=yes",
        "allow-weak=yes",
        "allow-downgrade-to-insecure=yes",
        "trusted=YES",
        "trusted=true",
        "trusted=1",
        "trusted=on",
    ],
)
def test_an_option_that_switches_off_apts_signature_check_is_a_problem_and_dropped(option):
    """With it, apt installs whatever the mirror serves — over plain http, whatever anyone on the way serves — and
    the keyring the installer deb brought (the root of trust its sha256 protects) vouches for nothing."""
    lists = {k: v.replace("[arch=amd64 ", f"[arch=amd64 {option} ") for k, v in NOBLE.items()}
    check = check_repositories(lists, "https://repo.radeon.com", "7.2.4", "30.30.4", "noble")
    assert check.problems == (
        f"{ROCM_LIST}: {option} switches off apt's signature check",
        f"{AMDGPU_LIST}: {option} switches off apt's signature check",
    )
    assert set(check.rewrites) == {ROCM_LIST, AMDGPU_LIST}
    assert check_repositories(check.rewrites, "https://repo.radeon.com", "7.2.4", "30.30.4", "noble").ok
    for text in check.rewrites.values():
        assert all(e.options == "[arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg]" for e in parse_list_entries(text))
    # Saying the check stays on is no problem.
    for option in ("trusted=no", "trusted=0", "allow-insecure=false"):
        fine = {k: v.replace("[arch=amd64 ", f"[arch=amd64 {option} ") for k, v in NOBLE.items()}
        assert check_repositories(fine, "https://repo.radeon.com", "7.2.4", "30.30.4", "noble").ok


def test_x_y_0_release_uses_the_folder_without_patch_level():
    check = check_repositories({}, "https://repo.radeon.com", "7.2.0", "30.30.0", "jammy")
    urls = {e.url for text in check.rewrites.values() for e in parse_list_entries(text)}
    assert urls == {
        "https://repo.radeon.com/rocm/apt/7.2",
        "https://repo.radeon.com/graphics/7.2/ubuntu",
        "https://repo.radeon.com/amdgpu/30.30/ubuntu",
    }
