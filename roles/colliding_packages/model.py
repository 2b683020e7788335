"""Colliding packages, the pure part: which installed distro packages block amdgpu-install (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from roles.colliding_packages.data import CollidingPackage, colliding_packages
from roles.debian.packages import InstalledPackage
from verify.debian.debversion import compare_versions
from verify.debian.distro_rocm import is_amd_version


@dataclass(frozen=True)
class Collision:
    package: InstalledPackage
    amd_version: str  # the version AMD's package has for this build (without revision)
    evidence: str

    def describe(self) -> str:
        return f"{self.package.name} {self.package.version} (distro; sorts above AMD's {self.amd_version})"


def find_collisions(
    installed: dict[str, InstalledPackage], build: str, table: tuple[CollidingPackage, ...] | None = None
) -> tuple[Collision, ...]:
    """The installed distro packages of `table` (default: the colliding packages of the release with build `build`)
    whose versions sort above AMD's for `build` (Debian's rules).

    AMD's own packages (of any release) are never collisions; a distro package that sorts below AMD's is not one
    either (apt upgrades it to AMD's)."""
    found = []
    for entry in colliding_packages(build) if table is None else table:
        package = installed.get(entry.name)
        if package is None or is_amd_version(package.version):
            continue
        amd_version = f"{entry.amd_component_version}.{build}"
        if compare_versions(package.version, amd_version) > 0:
            found.append(Collision(package=package, amd_version=amd_version, evidence=entry.evidence))
    return tuple(found)
