"""The preflight stage as a pyinfra deploy: read the facts, let the pure model judge, stop the host or note it fit."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from roles import run_reads
from roles.preflight.facts import ExistingUsers, FreeSpaceFor, GpuDevices, OsReleaseFile
from roles.preflight.model import PreflightInput, check, disk_needs
from roles.rocm.facts import InstalledRocm
from roles.settings import settings_for
from roles.stage_control import note, stop
from roles.venv.facts import VenvPathAccess
from roles.venv.model import venv_path_problem


@deploy("Preflight")
def preflight():
    settings = settings_for(host)
    rocm_pending = settings.rocm_install == "install" and not run_reads.read(InstalledRocm).is_complete(
        settings.rocm_release, settings.rocm_build)
    needs = disk_needs(settings.min_free_disk_gb, rocm_pending, settings.venv_path)
    users = tuple(dict.fromkeys((*settings.workstation_users, settings.venv_owner)))
    verdict = check(PreflightInput(
        os_release=run_reads.read(OsReleaseFile),
        rocm_install=settings.rocm_install,
        rocm_pending=rocm_pending,
        rocm_release=settings.rocm_release,
        gpu_required=settings.gpu_required,
        gpus=host.get_fact(GpuDevices) if settings.gpu_required else None,
        needs=needs,
        free=host.get_fact(FreeSpaceFor, paths=[need.path for need in needs]),
        required_users=users,
        existing_users=host.get_fact(ExistingUsers, users=list(users)),
    ))
    # Before any stage changes anything: a venv path other accounts can write is refused here (issue 9).
    venv_path = venv_path_problem(settings.venv_path, settings.venv_owner,
                                  run_reads.read(VenvPathAccess, path=settings.venv_path, owner=settings.venv_owner))
    problems = verdict.problems + ((venv_path,) if venv_path else ())
    if not problems:
        note(verdict.summary, name="host is fit")
    else:
        stop("host is not fit", "preflight: " + "; ".join(problems))
