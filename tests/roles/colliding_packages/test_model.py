"""roles/colliding_packages/model.py: a distro package collides exactly when dpkg itself sorts its version above
AMD's — checked against `dpkg --compare-versions` for the versions the distributions really ship."""

from __future__ import annotations

import subprocess

import pytest

from roles.colliding_packages.data import COLLIDING_PACKAGES
from roles.colliding_packages.model import find_collisions
from roles.debian.packages import InstalledPackage, parse_dpkg_query
from verify.debian.distro_rocm import is_amd_version

AMD = {entry.name: entry.amd_component_version for entry in COLLIDING_PACKAGES}
# Versions the archives really ship (apt-cache on Debian 12/13 here; Ubuntu's from ROCm issues #3656, #6367, #1899,
# #2378), plus AMD's own of other releases.
SHIPPED = [
    ("rocminfo", "5.2.3-2"),
    ("hipcc", "5.2.3-8"),
    ("rocm-cmake", "5.4.0-1"),
    ("rocm-device-libs", "5.2.3-2"),  # 12
    ("rocminfo", "6.1.2-2"),
    ("hipcc", "5.7.1-6+deb13u1"),
    ("rocm-cmake", "6.3.2-1"),  # Debian 13
    ("rocminfo", "5.7.1-3build1"),
    ("hipcc", "5.7.1-3"),
    ("rocm-cmake", "6.0.0-1"),  # Ubuntu 24.04
    ("rocminfo", "5.0.0-1"),
    ("rocm-device-libs", "5.0.0-1"),
    ("rocm-cmake", "5.0.0-1"),  # Ubuntu 22.04
    ("rocminfo", "7.1.1-0ubuntu1"),  # Ubuntu 26.04 (ROCm #3656)
    ("rocminfo", "1.0.0.60401-83~24.04"),
    ("hipcc", "1.1.1.70201-81~24.04"),  # AMD's, other releases
    ("rocm-cmake", "0.13.0"),  # a hypothetical distro version below AMD's: apt upgrades it, no collision
    ("rocminfo", "1:0.1-1"),  # an epoch wins over everything
]


def _dpkg_gt(a: str, b: str) -> bool:
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0


@pytest.mark.parametrize(("name", "version"), SHIPPED, ids=[f"{n}={v}" for n, v in SHIPPED])
def test_collision_is_dpkg_ordering_for_distro_packages(name, version):
    amd_version = f"{AMD[name]}.70204"
    collisions = find_collisions({name: InstalledPackage(name, version, "ii ")}, "70204")
    expected = _dpkg_gt(version, amd_version) and not is_amd_version(version)
    assert bool(collisions) == expected
    if expected:
        assert collisions[0].describe() == f"{name} {version} (distro; sorts above AMD's {amd_version})"


def test_the_debian_12_set_all_collide():
    # The real test root of test_real_runs.py relies on this.
    installed = {n: InstalledPackage(n, v, "ii ") for n, v in SHIPPED[:4]}
    assert [c.package.name for c in find_collisions(installed, "70204")] == [
        "rocminfo",
        "hipcc",
        "rocm-cmake",
        "rocm-device-libs",
    ]


def test_only_packages_on_disk_count():
    # After `apt-get remove`, dpkg keeps the configuration files ("rc"): nothing of the package is left to collide.
    installed = parse_dpkg_query(["rocminfo\t5.2.3-2\trc ", "hipcc\t5.2.3-8\tii "])
    assert [c.package.name for c in find_collisions(installed, "70204")] == ["hipcc"]
