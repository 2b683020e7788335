"""The apt hook stage as a pyinfra deploy: upload the verifier, then install (or, `apt_hook: False`, remove) it."""

from __future__ import annotations

from roles import run_reads
from roles.apt_hook import operations
from roles.apt_hook.facts import AptHookFiles
from roles.settings import HostSettings
from roles.stage import stage
from roles.verifier import upload_reads, upload_verifier, verifier_sha256


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    return [*(upload_reads() if settings.apt_hook else []), run_reads.Ask.of(AptHookFiles)]


@stage("Apt hook", reads=reads)
def apt_hook(settings: HostSettings) -> None:
    if not settings.apt_hook:
        operations.apt_hook(
            name="Remove the apt hook (apt_hook: False)", present=False, lock_timeout=settings.dpkg_lock_timeout
        )
        return
    upload_verifier()
    operations.apt_hook(
        name="Re-check linkage and strays after every dpkg run (DPkg::Post-Invoke)",
        present=True,
        venv=settings.venv_path,
        expect_rocm=settings.rocm_release,
        expect_bitsandbytes=settings.bitsandbytes_version,
        verifier_sha256=verifier_sha256(),
        lock_timeout=settings.dpkg_lock_timeout,
        metrics_dir=settings.node_exporter_textfile_dir,
    )
