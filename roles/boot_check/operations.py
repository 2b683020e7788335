"""The boot check's one operation: the unit installed, enabled and up to date (`present=True`), or gone."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.boot_check.facts import BootUnit
from roles.boot_check.model import UNIT_NAME, UNIT_PATH, install_commands, remove_commands, unit_text
from roles.stage import fail_command


@operation()
def boot_unit(present: bool = True, arguments: list[str] | None = None):
    """rocm-fleet-boot-check.service: the full check once per boot (`arguments`: verify boot-check's, run by the
    installed verifier's current version), enabled; or, with present=False, the unit, its link and its results
    removed."""
    files = run_reads.ask(BootUnit)
    if not present:
        if not files.anything:
            host.noop(f"{UNIT_NAME} not installed")
            return
        yield from remove_commands()
        return
    if files.python is None:
        yield fail_command(
            "boot check: python3 is not installed on this host, and the unit runs the verifier with it "
            "— apt-get install python3, then deploy again (or set boot_check: False)"
        )
        return
    wanted = unit_text(files.python, list(arguments or ()))
    if files.unit is not None and files.unit.splitlines() == wanted.splitlines() and files.enabled:
        host.noop(f"{UNIT_NAME} installed, enabled and up to date ({UNIT_PATH})")
        return
    yield from install_commands(wanted)
