"""Distro packages that carry the same name as one of AMD's ROCm packages: the data the colliding-packages stage uses.

AMD's own packages are versioned `<component version>.<ROCm build>-<revision>~<Ubuntu release>`, e.g. rocminfo
`1.0.0.70204-93~24.04`. The distributions package the same projects under the same names with the ROCm version as the
upstream version (Ubuntu noble: rocminfo 5.7.1-3build1; Debian 12: rocminfo 5.2.3-2), which sorts *above* AMD's.
apt then keeps the distro package (AMD's repo pin of 600 does not downgrade), and AMD's meta packages, which depend on
`rocminfo (= 1.0.0.70204-…)`, fail with unmet dependencies.

Add a package here when a distribution ships it under one of AMD's names; `amd_component_version` is the version
prefix of AMD's package for ROCm 7.2 (AMD's full version appends `.<build>-<revision>`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollidingPackage:
    name: str
    amd_component_version: str
    evidence: str  # where the collision was seen


COLLIDING_PACKAGES: tuple[CollidingPackage, ...] = (
    CollidingPackage("rocminfo", "1.0.0",
                     "ROCm issue #3656: Ubuntu's rocminfo 5.7.1-3build1 blocks rocm-hip-runtime"),
    CollidingPackage("hipcc", "1.1.1",
                     "ROCm issue #6367: rocm-hip-runtime-dev depends on hipcc (= 1.1.1.70204-93~24.04) but 5.7.1-3 "
                     "is to be installed"),
    CollidingPackage("rocm-cmake", "0.14.0",
                     "ROCm issue #6367: depends on rocm-cmake (= 0.14.0.70204-93~24.04) but 6.0.0-1 is to be "
                     "installed"),
    CollidingPackage("rocm-device-libs", "1.0.0",
                     "ROCm issue #2378: depends on rocm-device-libs (= 1.0.0.50600-67~22.04) but 5.0.0-1 is to be "
                     "installed; Debian 12 ships rocm-device-libs 5.2.3-2"),
)
