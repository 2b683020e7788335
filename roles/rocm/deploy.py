"""The ROCm stage as pyinfra deploys: `rocm()` installs ROCm, `gpu_access()` puts the workstation users and the venv's
owner into the GPU groups (also when ROCm is managed elsewhere: they still need /dev/kfd and /dev/dri); `rocm_stage()`
runs both, in that order — the stage as deploy.py and tasks/rocm.py run it."""

from __future__ import annotations

from pyinfra.operations import files

from roles import pins, run_reads
from roles.debian.facts import InstalledRocm, KernelDriver, OsReleaseFile, PackageVersions
from roles.debian.os_support import support_for
from roles.rocm import operations
from roles.rocm.facts import AdduserConf, AptPreferences, GroupAccounts, RocmAptLists
from roles.rocm.model import GPU_GROUPS, installer_file_name, installer_package_version, installer_url, plan_rocm
from roles.settings import HostSettings
from roles.stage import note, stage, stop
from verify.stack.rocm_release import rocm_release


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    if settings.rocm_install == "skip":
        return []
    ask = run_reads.Ask.of
    return [
        ask(OsReleaseFile),
        ask(InstalledRocm),
        ask(PackageVersions, packages=[operations.INSTALLER_PACKAGE]),
        ask(RocmAptLists),
        ask(AptPreferences),
        ask(KernelDriver),
    ]


def gpu_access_reads(settings: HostSettings) -> list[run_reads.Ask]:
    users = operations.gpu_users(list(settings.workstation_users), settings.venv_owner)
    asks = [run_reads.Ask.of(GroupAccounts, users=list(users), groups=list(GPU_GROUPS))] if users else []
    return asks + ([run_reads.Ask.of(AdduserConf)] if settings.new_users_gpu_groups else [])


@stage("ROCm", reads=reads)
def rocm(settings: HostSettings) -> None:
    if settings.rocm_install == "skip":
        note("rocm_install is 'skip': ROCm is managed elsewhere on this host", name="skipped: rocm_install is 'skip'")
        return
    os_release = run_reads.read(OsReleaseFile)  # preflight read it while planning too
    support = support_for(os_release)
    if support.installer_codename is None:
        stop("no AMD installer for this OS", f"ROCm: {support.note}")
        return
    codename = support.installer_codename
    release, build = settings.rocm_release, settings.rocm_build
    plan = plan_rocm(run_reads.read(InstalledRocm), release, build, settings.rocm_other_release)
    if plan.action == "stop":
        stop("another ROCm release", f"ROCm: {plan.reason}")
        return

    version = installer_package_version(release, build)
    deb_path = f"{pins.INSTALLER_CACHE_DIR}/{installer_file_name(release, build)}"
    if operations.installed_installer_version() != version:
        # Root's own, 755: the download is staged in it (below), so no other account may add or swap files there.
        files.directory(
            name=f"Directory {pins.INSTALLER_CACHE_DIR}",
            path=pins.INSTALLER_CACHE_DIR,
            user="root",
            group="root",
            mode="755",
        )
        files.download(
            name=f"Download {installer_file_name(release, build)}",
            src=installer_url(settings.repo_radeon_base_url, release, build, codename),
            dest=deb_path,
            sha256sum=settings.amdgpu_install_sha256 or pins.AMDGPU_INSTALL_SHA256.get(codename),
            # Without it pyinfra has root's curl write to /tmp/pyinfra-<sha1 of dest>, a name any account can plant
            # first (a symlink to a file root then overwrites, a FIFO that hangs the run, a file swapped before the
            # mv); in the root-owned cache directory only root can.
            temp_dir=pins.INSTALLER_CACHE_DIR,
        )
    operations.installer_package(
        name=f"Install amdgpu-install {version}",
        deb_path=deb_path,
        version=version,
        lock_timeout=settings.dpkg_lock_timeout,
    )
    operations.amdgpu_repositories(
        name="Check AMD's apt lists",
        base_url=settings.repo_radeon_base_url,
        release=release,
        driver_release=settings.amdgpu_driver_release,
        codename=codename,
        installer_version=version,
        lock_timeout=settings.dpkg_lock_timeout,
    )
    release_data = rocm_release(release)
    operations.amd_pin(
        name=f"AMD's apt pin (o={release_data.apt.origin}, {release_data.apt.pin_priority})",
        origin=release_data.apt.origin,
        priority=release_data.apt.pin_priority,
        path=release_data.apt.pin_files[0],
        installer_version=version,
    )
    operations.rocm_stack(
        name=f"amdgpu-install --usecase={pins.AMDGPU_INSTALL_USECASE} --no-dkms (ROCm {release})",
        release=release,
        build=build,
        usecase=pins.AMDGPU_INSTALL_USECASE,
        side_by_side=plan.side_by_side,
        lock_timeout=settings.dpkg_lock_timeout,
    )
    operations.opt_rocm_points_at(name=f"/opt/rocm -> /opt/rocm-{release}", release=release)
    operations.kernel_driver_packages(
        name="Kernel packages for the in-box amdgpu driver", lock_timeout=settings.dpkg_lock_timeout
    )


@stage("GPU access", reads=gpu_access_reads)
def gpu_access(settings: HostSettings) -> None:
    users, owner = list(settings.workstation_users), settings.venv_owner
    # The venv's owner runs the runtime probe and NF4 test (the verification stage and the boot check), so it needs
    # the GPU too.
    who = "workstation_users" if owner == "root" or owner in users else "workstation_users and venv_owner"
    operations.gpu_groups(name=f"{who} in render and video", users=users, venv_owner=owner)
    if settings.new_users_gpu_groups:
        operations.new_user_groups(
            name="New accounts join render and video (/etc/adduser.conf)", groups=list(GPU_GROUPS)
        )


def rocm_stage() -> None:
    """The ROCm stage: ROCm, then the GPU groups (each its own deploy, so each line of the plan says which)."""
    rocm()
    gpu_access()


# What the stage asks a host on a no-op run, read ahead (deploy.py): both deploys' facts.
rocm_stage.reads = lambda settings: [*reads(settings), *gpu_access_reads(settings)]
