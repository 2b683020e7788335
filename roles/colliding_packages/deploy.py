"""The colliding-packages stage as a pyinfra deploy."""

from __future__ import annotations

from roles import run_reads
from roles.colliding_packages.operations import installed_collisions, remove_colliding_packages, watched
from roles.debian.facts import PackageVersions
from roles.settings import HostSettings
from roles.stage import note, stage, stop


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    if settings.rocm_install == "skip":
        return []
    return [run_reads.Ask.of(PackageVersions, packages=list(watched(settings.rocm_build)))]


@stage("Colliding packages", reads=reads)
def colliding_packages(settings: HostSettings) -> None:
    if settings.rocm_install == "skip":
        note(
            "rocm_install is 'skip': amdgpu-install does not run, so nothing can collide with it",
            name="skipped: rocm_install is 'skip'",
        )
        return
    if settings.colliding_packages == "stop":
        collisions = installed_collisions(settings.rocm_build)
        if collisions:
            stop(
                "colliding distro packages",
                "colliding packages: "
                + ", ".join(c.describe() for c in collisions)
                + " would block amdgpu-install (ROCm #3656, #6367); colliding_packages is 'stop': remove them "
                f"(sudo apt-get remove {' '.join(c.package.name for c in collisions)}) or set "
                "colliding_packages: remove",
            )
            return
    remove_colliding_packages(
        name="Remove distro packages that block amdgpu-install",
        build=settings.rocm_build,
        lock_timeout=settings.dpkg_lock_timeout,
    )
