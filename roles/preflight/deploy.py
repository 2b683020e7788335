"""The preflight stage as a pyinfra deploy: read the facts, let the pure model judge, stop the host or note it fit."""

from __future__ import annotations

from pyinfra import host, logger

from roles import run_reads
from roles.debian.facts import InstalledRocm, KernelDriver, OsReleaseFile, VenvPathAccess
from roles.debian.path_access import venv_path_problem
from roles.preflight.facts import ExistingUsers, FreeSpaceFor, GpuDevices
from roles.preflight.model import PreflightInput, check, disk_needs
from roles.settings import HostSettings
from roles.stage import note, stage, stop


def _users(settings: HostSettings) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*settings.workstation_users, settings.venv_owner)))


def _disk_paths(settings: HostSettings) -> list[str]:
    """Every path disk_needs may name: read before knowing whether ROCm is still to come (one question, not two)."""
    needs = disk_needs(settings.min_free_disk_gb, settings.rocm_install == "install", settings.venv_path)
    return [need.path for need in needs]


def _kernel_question(settings: HostSettings) -> dict:
    """KernelDriver's arguments: apt's candidates only where the ROCm stage runs, which asks the same question (then
    one read serves both); preflight itself needs none of them."""
    return {} if settings.rocm_install == "install" else {"apt_candidates": False}


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    ask = run_reads.Ask.of
    return [
        ask(InstalledRocm),
        ask(OsReleaseFile),
        ask(FreeSpaceFor, paths=_disk_paths(settings)),
        ask(ExistingUsers, users=list(_users(settings))),
        ask(KernelDriver, **_kernel_question(settings)),
        ask(VenvPathAccess, path=settings.venv_path, owner=settings.venv_owner),
        *([ask(GpuDevices)] if settings.gpu_required else []),
    ]


@stage("Preflight", reads=reads)
def preflight(settings: HostSettings) -> None:
    rocm_pending = settings.rocm_install == "install" and not run_reads.read(InstalledRocm).is_complete(
        settings.rocm_release, settings.rocm_build
    )
    needs = disk_needs(settings.min_free_disk_gb, rocm_pending, settings.venv_path)
    users = _users(settings)
    verdict = check(
        PreflightInput(
            os_release=run_reads.read(OsReleaseFile),
            rocm_install=settings.rocm_install,
            rocm_pending=rocm_pending,
            rocm_release=settings.rocm_release,
            gpu_required=settings.gpu_required,
            gpus=run_reads.ask(GpuDevices) if settings.gpu_required else None,
            needs=needs,
            free=run_reads.ask(FreeSpaceFor, paths=_disk_paths(settings)),
            required_users=users,
            existing_users=run_reads.ask(ExistingUsers, users=list(users)),
            kernels=run_reads.ask(KernelDriver, **_kernel_question(settings)),
        )
    )
    for warning in verdict.warnings:  # deploy code runs once per host: each warning is printed once
        host.log_styled(f"preflight: {warning}", fg="yellow", log_func=logger.warning)
    # Before any stage changes anything: a venv path other accounts can write is refused here.
    venv_path = venv_path_problem(
        settings.venv_path,
        settings.venv_owner,
        run_reads.read(VenvPathAccess, path=settings.venv_path, owner=settings.venv_owner),
    )
    problems = verdict.problems + ((venv_path,) if venv_path else ())
    if not problems:
        note(verdict.summary, name="host is fit")
    else:
        stop("host is not fit", "preflight: " + "; ".join(problems))
