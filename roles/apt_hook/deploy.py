"""The apt hook stage as a pyinfra deploy: install the verifier, then install (or, `apt_hook: False`, remove) the
hook."""

from __future__ import annotations

from roles import run_reads
from roles.apt_hook import operations
from roles.apt_hook.facts import AptHookFiles
from roles.settings import HostSettings
from roles.stage import stage
from roles.verifier import install_reads, install_verifier, question_for


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    return [*(install_reads() if settings.apt_hook else []), run_reads.Ask.of(AptHookFiles)]


@stage("Apt hook", reads=reads)
def apt_hook(settings: HostSettings) -> None:
    if not settings.apt_hook:
        operations.apt_hook(
            name="Remove the apt hook (apt_hook: False)", present=False, lock_timeout=settings.dpkg_lock_timeout
        )
        return
    new_verifier = install_verifier(settings.dpkg_lock_timeout)
    operations.apt_hook(
        name="Re-check linkage and strays after every dpkg run (dpkg post-invoke, apt DPkg::Post-Invoke)",
        present=True,
        question=question_for(settings),
        new_verifier=new_verifier,
        lock_timeout=settings.dpkg_lock_timeout,
    )
