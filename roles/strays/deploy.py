"""Stage 5 as a pyinfra deploy: upload the verifier, then report or purge the host's stray distro ROCm packages."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from roles.settings import settings_for
from roles.stage import host_is_stopped, note
from roles.strays.operations import stray_packages
from roles.verifier import upload_verifier


@deploy("Strays")
def stray_distro_rocm() -> None:
    if host_is_stopped():
        note("skipped: an earlier stage stopped this host")
        return
    settings = settings_for(host)
    upload_verifier()
    verb = "purge where nothing needs them" if settings.stray_policy == "remove" else "report"
    stray_packages(
        name=f"Distro ROCm packages ({verb})",
        policy=settings.stray_policy,
        dpkg_lock_timeout=settings.dpkg_lock_timeout,
    )
