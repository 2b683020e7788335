"""The apt hook stage as a pyinfra deploy: upload the verifier, then install (or, `apt_hook: False`, remove) the hook."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy

from roles.apt_hook.operations import apt_hook
from roles.settings import settings_for
from roles.stage_control import host_is_stopped, note
from roles.verifier import build_zipapp, upload_verifier


def verifier_sha256() -> str:
    return hashlib.sha256(build_zipapp().read_bytes()).hexdigest()


@deploy("Apt hook")
def apt_hook_stage() -> None:
    if host_is_stopped():
        note("skipped: an earlier stage stopped this host")
        return
    settings = settings_for(host)
    if not settings.apt_hook:
        apt_hook(name="Remove the apt hook (apt_hook: False)", present=False, lock_timeout=settings.dpkg_lock_timeout)
        return
    upload_verifier()
    apt_hook(
        name="Re-check linkage and strays after every dpkg run (DPkg::Post-Invoke)",
        present=True,
        venv=settings.venv_path,
        expect_rocm=settings.rocm_release,
        expect_bitsandbytes=settings.bitsandbytes_version,
        verifier_sha256=verifier_sha256(),
        lock_timeout=settings.dpkg_lock_timeout,
        metrics_dir=settings.node_exporter_textfile_dir,
    )
