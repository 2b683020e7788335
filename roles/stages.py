"""The deploy's stages by task name (tasks/<name>.py runs the deploys listed here), so that deploy.py can read ahead
what all of them will ask each host — one command per host for the whole run (roles/run_reads.py)."""

from __future__ import annotations

from collections.abc import Iterable

from pyinfra import host

from roles import run_reads
from roles.apt_hook.deploy import apt_hook
from roles.boot_check.deploy import boot_check
from roles.colliding_packages.deploy import colliding_packages
from roles.preflight.deploy import preflight
from roles.rocm.deploy import rocm_stage
from roles.settings import settings_for
from roles.strays.deploy import strays
from roles.venv.deploy import venv
from roles.verification.deploy import verify

DEPLOYS = {
    "preflight": (preflight,),
    "colliding_packages": (colliding_packages,),
    "rocm": (rocm_stage,),
    "venv": (venv,),
    "strays": (strays,),
    "apt_hook": (apt_hook,),
    "boot_check": (boot_check,),
    "verify": (verify,),
}


def read_ahead_for_stages(names: Iterable[str]) -> None:
    """Read ahead, in one command to the current host, every fact the stages `names` ask on a no-op run."""
    settings = settings_for(host)
    run_reads.read_ahead(
        ask for name in names for stage in DEPLOYS[name] if stage.reads is not None for ask in stage.reads(settings)
    )
