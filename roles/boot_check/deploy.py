"""The boot check stage as a pyinfra deploy: install the verifier the unit runs, then install (or, `boot_check:
False`, remove) the unit."""

from __future__ import annotations

from roles import run_reads
from roles.boot_check import operations
from roles.boot_check.facts import BootUnit
from roles.boot_check.model import boot_check_arguments
from roles.settings import HostSettings
from roles.stage import stage
from roles.verification.deploy import check_arguments
from roles.verifier import install_reads, install_verifier


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    return [*(install_reads() if settings.boot_check else []), run_reads.Ask.of(BootUnit)]


@stage("Boot check", reads=reads)
def boot_check(settings: HostSettings) -> None:
    if not settings.boot_check:
        operations.boot_unit(name="Remove the boot-time check (boot_check: False)", present=False)
        return
    install_verifier(settings.dpkg_lock_timeout)
    operations.boot_unit(
        name="Re-verify once per boot (rocm-fleet-boot-check.service)",
        present=True,
        arguments=boot_check_arguments(check_arguments(settings)),
    )
