"""The colliding-packages operation: reads the installed versions in its body (when planning, and again when it runs)
and removes the distro packages that would block amdgpu-install, saying why and what apt removes with them."""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.colliding_packages.data import colliding_packages
from roles.colliding_packages.model import find_collisions
from roles.debian.apt_commands import apt_get
from roles.debian.facts import AptRemovalSimulation, PackageVersions
from roles.stage import tell_command


def watched(build: str) -> tuple[str, ...]:
    """The names of the colliding packages of the release with build `build`."""
    return tuple(entry.name for entry in colliding_packages(build))


def installed_collisions(build: str):
    return find_collisions(run_reads.ask(PackageVersions, packages=list(watched(build))), build)


@operation()
def remove_colliding_packages(build: str, lock_timeout: int):
    """No distro package whose version sorts above AMD's same-named package for ROCm build `build` is installed."""
    collisions = installed_collisions(build)
    if not collisions:
        host.noop(f"no distro package collides with AMD's (checked: {', '.join(watched(build))})")
        return
    names = [collision.package.name for collision in collisions]
    removed = run_reads.ask(AptRemovalSimulation, packages=names)
    dependents = [f"{name} {version}".strip() for name, version in removed if name not in names]
    message = (
        "removing "
        + ", ".join(c.describe() for c in collisions)
        + ": apt would keep them and amdgpu-install would fail with unmet dependencies (ROCm #3656, #6367)"
    )
    if dependents:
        message += f"; apt also removes what depends on them: {', '.join(dependents)}"
    yield tell_command(message)
    yield apt_get("remove " + " ".join(shlex.quote(name) for name in names), lock_timeout)
