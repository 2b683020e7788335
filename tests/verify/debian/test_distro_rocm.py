"""verify/debian/distro_rocm.py: which packages are AMD's own (never strays, never collisions)."""

import pytest

from verify.debian.distro_rocm import is_amd_package, is_amd_version

AMD_VERSIONS = [
    "1.0.0.70204-93~24.04",
    "22.0.0.26084.70201-81~24.04",
    "7.2.4.70204-93~22.04",
    "2.2.0.60202-116~22.04",
    "6.4.0.60400-crdnnh.15158~22.04",
]
DISTRO_VERSIONS = ["5.7.1-3build1", "6.1.2+dfsg-0ubuntu9", "5.2.3-2", "5.7.1-6+deb13u1", "1:0.1-1"]


@pytest.mark.parametrize("version", AMD_VERSIONS)
def test_amd_versions_of_any_release_are_recognised(version):
    assert is_amd_version(version)
    assert is_amd_package("Debian ROCm Team <debian-ai@lists.debian.org>", version)


@pytest.mark.parametrize("version", DISTRO_VERSIONS)
def test_distro_versions_are_not_amd(version):
    assert not is_amd_version(version)
    assert not is_amd_package("Debian ROCm Team <debian-ai@lists.debian.org>", version)


def test_amd_maintainer_alone_marks_a_package_as_amd():
    assert is_amd_package("ROCm Dev Support <rocm-dev.support@amd.com>", "5.7.1-3")
