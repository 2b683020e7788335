"""verify/debian/apt_policy.py and the pin judgement of verify/checks/apt.py, with real apt as the oracle: a private
apt configuration (tests/support/apt_sandbox.py) with a stand-in "distribution" repository (Origin Debian, the
versions Debian 12 ships) and a stand-in AMD repository (Origin repo.radeon.com, AMD's version strings) — real
`apt-get update` and `apt-cache policy`, whose output the parser reads. Plus this machine's own apt-cache output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.apt_sandbox import AptSandbox
from verify.checks.apt import judge_pin, pin_text
from verify.debian.apt_policy import (
    origin_of,
    parse_package_files,
    parse_package_policies,
    parse_preferences,
    pins_origin,
)
from verify.report.report import FAIL, PASS
from verify.stack.rocm_release import rocm_release

DATA = Path(__file__).parent / "data" / "apt_policy"
RELEASE = rocm_release("7.2.4")
APT = RELEASE.apt
NAMES = tuple(p.name for p in RELEASE.colliding_packages)
DEBIAN_12 = [("rocminfo", "5.2.3-2"), ("hipcc", "5.2.3-8"), ("rocm-cmake", "5.4.0-1"), ("rocm-device-libs", "5.2.3-2")]
AMD_7_2_4 = [
    ("rocminfo", "1.0.0.70204-93~22.04"),
    ("hipcc", "1.1.1.70204-93~22.04"),
    ("rocm-cmake", "0.14.0.70204-93~22.04"),
    ("rocm-device-libs", "1.0.0.70204-93~22.04"),
]


def test_this_machines_apt_cache_output_parses():
    """Recorded on the Debian 12 build machine (data/apt_policy/*.txt): Debian's versions, no AMD repository."""
    policies = parse_package_policies((DATA / "debian12_no_amd_repo.txt").read_text())
    files = parse_package_files((DATA / "debian12_package_files.txt").read_text())
    assert {name: p.candidate for name, p in policies.items()} == dict(DEBIAN_12)
    rocminfo = policies["rocminfo"]
    assert rocminfo.installed is None and rocminfo.versions[0].priority == 500
    assert origin_of(rocminfo.versions[0].repositories[0], files) == "Debian"


def test_installed_version_is_marked_and_the_status_file_is_not_a_repository():
    text = """python3:
  Installed: 3.11.2-1+b1
  Candidate: 3.11.2-1+b1
  Version table:
 *** 3.11.2-1+b1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
"""
    version = parse_package_policies(text)["python3"].versions[0]
    assert version.installed and version.repositories == ("http://deb.debian.org/debian bookworm/main amd64 Packages",)


@pytest.fixture
def apt(tmp_path):
    sandbox = AptSandbox(tmp_path)
    sandbox.repository("bookworm", origin="Debian", packages=DEBIAN_12)
    sandbox.repository("rocm-7.2.4", origin="repo.radeon.com", packages=AMD_7_2_4)
    return sandbox


def _judge(apt: AptSandbox):
    apt.update()
    pins = [
        pin
        for path in sorted((apt.etc / "preferences.d").iterdir())
        for pin in parse_preferences(path.read_text(), f"/etc/apt/preferences.d/{path.name}")
    ]
    return judge_pin(RELEASE, pins, parse_package_policies(apt.policy(*NAMES)), parse_package_files(apt.policy()))


def test_amds_pin_makes_every_shared_name_amds(apt):
    apt.preference("repo-radeon-pin-600", pin_text(APT.origin, APT.pin_priority))
    result = _judge(apt)
    assert result.status == PASS, result.reason
    assert result.reason == (
        "AMD's pin /etc/apt/preferences.d/repo-radeon-pin-600 (600) is effective: apt's "
        "candidates for rocminfo, hipcc, rocm-cmake, rocm-device-libs come from repo.radeon.com"
    )


def test_without_the_pin_the_distributions_higher_versions_win_and_the_check_fails_with_the_fix(apt):
    result = _judge(apt)
    assert result.status == FAIL
    assert result.reason.startswith(
        "AMD's pin is missing (no /etc/apt/preferences.d/repo-radeon-pin-600 or /etc/apt/preferences.d/rocm-pin-600 "
        "pinning o=repo.radeon.com above 500): an upgrade can replace AMD's packages with the distribution's "
        "(apt's candidate for rocminfo is 5.2.3-2 (priority 500, from file:"
    )
    assert result.reason.endswith(
        "restore it: pyinfra INVENTORY tasks/rocm.py (it writes /etc/apt/preferences.d/repo-radeon-pin-600: "
        "Package: * / Pin: release o=repo.radeon.com / Pin-Priority: 600)"
    )
    assert result.evidence["names"]["hipcc"]["from_amd"] is False


def test_a_pin_that_another_preference_outranks_is_not_effective(apt):
    apt.preference("repo-radeon-pin-600", pin_text(APT.origin, APT.pin_priority))
    apt.preference("zz-local", "Package: rocminfo\nPin: release o=Debian\nPin-Priority: 700\n")
    result = _judge(apt)
    assert result.status == FAIL
    assert result.reason.startswith(
        "AMD's pin /etc/apt/preferences.d/repo-radeon-pin-600 (600) is not effective: "
        "apt's candidate for rocminfo is 5.2.3-2 (priority 700, from file:"
    )
    assert "not AMD's 1.0.0.70204-93~22.04 (priority 600)" in result.reason


def test_a_mirror_whose_release_file_names_another_origin_is_not_pinned(tmp_path):
    """A mirror that rewrote the Release file's Origin: AMD's pin no longer matches it."""
    apt = AptSandbox(tmp_path)
    apt.repository("bookworm", origin="Debian", packages=DEBIAN_12)
    apt.repository("mirror", origin="mirror.lab.example.org", packages=AMD_7_2_4)
    apt.preference("repo-radeon-pin-600", pin_text(APT.origin, APT.pin_priority))
    result = _judge(apt)
    assert result.status == FAIL
    assert "apt knows no version of rocminfo from repo.radeon.com" in result.reason


def test_preferences_files_and_what_counts_as_amds_pin():
    pins = parse_preferences(
        """Explanation: AMD's pin
Package: *
Pin: release o=repo.radeon.com
Pin-Priority: 600

Package: rocminfo
Pin: release o=repo.radeon.com
Pin-Priority: 1001

# a comment
Package: *
Pin: origin repo.radeon.com
Pin-Priority: 600
""",
        "/etc/apt/preferences.d/x",
    )
    assert [(p.package, p.pin, p.priority) for p in pins] == [
        ("*", "release o=repo.radeon.com", 600),
        ("rocminfo", "release o=repo.radeon.com", 1001),
        ("*", "origin repo.radeon.com", 600),
    ]
    assert [pins_origin(p, "repo.radeon.com") for p in pins] == [True, False, False]
