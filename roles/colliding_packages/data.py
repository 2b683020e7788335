"""Distro packages that carry the same name as one of AMD's ROCm packages: the data the colliding-packages stage uses.

AMD's own packages are versioned `<component version>.<ROCm build>-<revision>~<Ubuntu release>`, e.g. rocminfo
`1.0.0.70204-93~24.04`. The distributions package the same projects under the same names with the ROCm version as the
upstream version (Ubuntu noble: rocminfo 5.7.1-3build1; Debian 12: rocminfo 5.2.3-2), which sorts *above* AMD's.
apt then keeps the distro package (AMD's repo pin of 600 does not downgrade), and AMD's meta packages, which depend on
`rocminfo (= 1.0.0.70204-…)`, fail with unmet dependencies.

The list is part of what a release is: `colliding_packages` in its file, verify/stack/releases/X.Y.Z.json (add a
package there when a distribution ships it under one of AMD's names; `amd_component_version` is the version prefix
of AMD's package for that release, AMD's full version appends `.<build>-<revision>`).
"""

from __future__ import annotations

from roles import pins
from verify.stack.rocm_release import CollidingPackage, release_with_build, rocm_release

__all__ = ["COLLIDING_PACKAGES", "CollidingPackage", "colliding_packages"]


def colliding_packages(build: str) -> tuple[CollidingPackage, ...]:
    """The colliding packages of the release with AMD build number `build` (settings check it matches the release)."""
    return release_with_build(build).colliding_packages


# The default release's (roles/pins.py): what the README's table of variables names.
COLLIDING_PACKAGES: tuple[CollidingPackage, ...] = rocm_release(pins.ROCM_RELEASE).colliding_packages
