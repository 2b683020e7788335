"""Stage 5 as a pyinfra deploy: install the verifier, then report or purge the host's stray distro ROCm packages."""

from __future__ import annotations

from roles import run_reads
from roles.settings import HostSettings
from roles.stage import stage
from roles.strays.facts import DistroRocmStrays
from roles.strays.operations import stray_packages
from roles.verifier import install_reads, install_verifier


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    return [*install_reads(), run_reads.Ask.of(DistroRocmStrays)]


@stage("Strays", reads=reads)
def strays(settings: HostSettings) -> None:
    install_verifier(settings.dpkg_lock_timeout)
    verb = "purge where nothing needs them" if settings.stray_policy == "remove" else "report"
    stray_packages(
        name=f"Distro ROCm packages ({verb})",
        policy=settings.stray_policy,
        dpkg_lock_timeout=settings.dpkg_lock_timeout,
    )
