"""ROCm operations. Each reads its facts in its body, so it decides twice: when planning (on the host as it was) and
again when it runs (on the host as the earlier operations left it) — e.g. the apt lists are checked after the
installer deb has written them. Each yields commands, or notes through `host.noop` what is already true."""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.debian.apt_commands import apt_get, with_dpkg_lock_timeout
from roles.debian.facts import InstalledRocm, KernelDriver, PackageVersions
from roles.rocm.driver import (
    ADDUSER_CONF,
    adduser_conf_update,
    parse_preference_files,
    write_file_command,
    write_pin_command,
)
from roles.rocm.facts import AdduserConf, AptPreferences, GroupAccounts, RocmAptLists
from roles.rocm.model import GPU_GROUPS, check_repositories, wanted_repositories
from roles.stage import fail_command, tell_command

INSTALLER_PACKAGE = "amdgpu-install"
LIST_PARTIAL_PREFIX = "/etc/apt/.rocm-fleet-list."


def installed_installer_version() -> str:
    """The version of amdgpu-install dpkg has installed on the current host, or "" when none is."""
    package = run_reads.ask(PackageVersions, packages=[INSTALLER_PACKAGE]).get(INSTALLER_PACKAGE)
    return package.version if package and package.status.startswith(("ii", "hi")) else ""


@operation()
def installer_package(deb_path: str, version: str, lock_timeout: int):
    """AMD's amdgpu-install package at `version`, installed from the deb at `deb_path` with apt (which resolves its
    dependencies and waits for the dpkg lock)."""
    installed = installed_installer_version()
    if installed == version:
        host.noop(f"{INSTALLER_PACKAGE} {version} is installed")
        return
    yield apt_get(f"install {shlex.quote(deb_path)}", lock_timeout)


@operation()
def amdgpu_repositories(
    base_url: str, release: str, driver_release: str, codename: str, installer_version: str, lock_timeout: int
):
    """The apt lists amdgpu-install wrote point at rocm/apt/RELEASE, graphics/RELEASE/ubuntu and
    amdgpu/DRIVER/ubuntu for `codename` — rewritten (then `apt-get update`) when they do not."""
    current = run_reads.ask(RocmAptLists)
    if not current and installed_installer_version() != installer_version:
        # Planning on a host without the installer yet: its deb writes the lists; this runs again after it.
        host.noop(f"the apt lists come with {INSTALLER_PACKAGE} {installer_version}: checked once it is installed")
        return
    check = check_repositories(current, base_url, release, driver_release, codename)
    if check.ok:
        urls = [
            url for urls in wanted_repositories(base_url, release, driver_release, codename).values() for url in urls
        ]
        host.noop(f"apt lists point at {', '.join(urls)} for {codename}")
        return
    yield tell_command("fixing AMD's apt lists: " + "; ".join(check.problems))
    for path, text in sorted(check.rewrites.items()):
        # Written under a private, unpredictable name (two runs at once never share it) in /etc/apt — not in
        # sources.list.d, whose every file apt reads, or warns about — and moved into place: apt never reads half.
        yield (
            f'partial=$(mktemp {LIST_PARTIAL_PREFIX}XXXXXXXX) && printf %s {shlex.quote(text)} > "$partial" && '
            f'chmod 644 "$partial" && mv "$partial" {shlex.quote(path)}'
        )
    yield apt_get("update", lock_timeout)


@operation()
def rocm_stack(release: str, build: str, usecase: str, side_by_side: bool, lock_timeout: int):
    """ROCm RELEASE installed by `amdgpu-install -y --usecase=USECASE --no-dkms` (the inbox kernel driver is used),
    after an `apt-get update`; with `--rocmrelease=RELEASE` when installed beside another release."""
    installation = run_reads.ask(InstalledRocm)
    if installation.is_complete(release, build):
        host.noop(f"ROCm {release} is installed (/opt/rocm-{release}, rocm-core {release}.{build})")
        return
    flags = f"-y --usecase={usecase} --no-dkms" + (f" --rocmrelease={release}" if side_by_side else "")
    yield apt_get("update", lock_timeout)
    yield with_dpkg_lock_timeout(f"amdgpu-install {flags}", lock_timeout)
    tree = f"/opt/rocm-{release}"
    yield (
        f"test -d {tree} || {{ echo 'amdgpu-install ended without creating {tree}: read its output above' >&2; "
        "exit 1; }"
    )


@operation()
def opt_rocm_points_at(release: str):
    """/opt/rocm resolves to /opt/rocm-RELEASE (bitsandbytes' RUNPATH searches /opt/rocm/lib first), set through
    update-alternatives as AMD's packages register it."""
    installation = run_reads.ask(InstalledRocm)
    target = f"/opt/rocm-{release}"
    if installation.opt_rocm == target:
        host.noop(f"/opt/rocm points at {target}")
        return
    if not any(tree.path == target for tree in installation.trees):
        host.noop(f"/opt/rocm is checked once {target} is installed")
        return
    yield f"update-alternatives --set rocm {target}"


def gpu_users(users: list[str], venv_owner: str | None) -> dict[str, str]:
    """{account: the setting that names it} of everyone gpu_groups puts in the GPU groups."""
    setting = {user: "workstation_users" for user in users}
    if venv_owner and venv_owner != "root":
        setting.setdefault(venv_owner, "venv_owner")
    return setting


@operation()
def gpu_groups(users: list[str], venv_owner: str | None = None):
    """Each user is in `render` and `video` (appended: their other groups stay); the groups exist. `venv_owner` too,
    unless it is root or already among `users`: the runtime probe and the NF4 test run as that account
    (verify/checks/probe_account.py), so it must reach /dev/kfd and /dev/dri as the venv's user would."""
    setting = gpu_users(users, venv_owner)
    users = list(setting)
    if not users:
        host.noop("no workstation_users to add to render and video")
        return
    accounts = run_reads.ask(GroupAccounts, users=list(users), groups=list(GPU_GROUPS))
    changes = False
    for group in GPU_GROUPS:
        if group not in accounts.groups:
            changes = True
            yield f"getent group {group} >/dev/null || groupadd --system {group}"
    for user in users:
        groups = accounts.memberships.get(user)
        if groups is None:
            changes = True
            fix = (
                "remove it from workstation_users"
                if setting[user] == "workstation_users"
                else "set venv_owner to an existing account"
            )
            yield fail_command(f"user {user} does not exist ({setting[user]}): create the account, or {fix}")
            continue
        missing = [group for group in GPU_GROUPS if group not in groups]
        if missing:
            changes = True
            yield f"usermod -a -G {','.join(missing)} {shlex.quote(user)}"
    if not changes:
        host.noop(f"{', '.join(users)} in {' and '.join(GPU_GROUPS)}")


@operation()
def amd_pin(origin: str, priority: int, path: str, installer_version: str):
    """AMD's apt pin is in place: some preferences file pins `release o=ORIGIN` above the distribution's 500 (the
    installer deb ships one); when none does, AMD's text is written to `path` again. Without it an upgrade replaces
    AMD's rocminfo, hipcc, rocm-cmake … with the distribution's higher-numbered ones (ROCm #3656, #6367)."""
    if installed_installer_version() != installer_version:
        # Planning on a host without the installer yet: its deb brings the pin; this runs again after it.
        host.noop(f"AMD's apt pin comes with {INSTALLER_PACKAGE} {installer_version}: checked once it is installed")
        return
    state = parse_preference_files(run_reads.ask(AptPreferences), origin)
    if state.present:
        host.noop(f"AMD's apt pin is in place ({state.amd_pin}: o={origin} above 500)")
        return
    yield tell_command(
        f"AMD's apt pin is missing (no preferences file pins o={origin} above 500): writing {path} "
        "again, or an upgrade would replace AMD's packages with the distribution's"
    )
    yield write_pin_command(path, origin, priority)


@operation()
def kernel_driver_packages(lock_timeout: int):
    """AMD's kernel prerequisites for the in-box amdgpu driver (--no-dkms): linux-headers-<release> and, where the
    distribution splits its modules (Ubuntu), linux-modules-extra-<release> — for the running kernel and the one the
    next boot runs, those apt has — and on Debian the driver's firmware, firmware-amd-graphics. Whether the kernel
    meta package keeps bringing modules-extra is said either way."""
    kernels = run_reads.ask(KernelDriver)
    wanted = kernels.driver_packages_wanted()
    statement = kernels.meta_statement()
    if not wanted:
        nxt = f", next boot {kernels.next_boot}" if kernels.next_boot and kernels.next_boot != kernels.running else ""
        host.noop(f"kernel packages for amdgpu in place (running {kernels.running}{nxt}); {statement}")
        return
    yield tell_command(
        f"installing {', '.join(wanted)} (AMD's prerequisites for the in-box amdgpu driver); {statement}"
    )
    yield apt_get("install " + " ".join(shlex.quote(name) for name in wanted), lock_timeout)


@operation()
def new_user_groups(groups: list[str]):
    """Accounts made later with adduser join `groups` too: ADD_EXTRA_GROUPS=1 and the groups in EXTRA_GROUPS of
    /etc/adduser.conf (AMD's post-install docs), the groups already listed there kept."""
    text = run_reads.ask(AdduserConf)
    if text is None:
        host.noop(f"no {ADDUSER_CONF} (adduser is not installed): accounts are made another way")
        return
    updated = adduser_conf_update(text, tuple(groups))
    if updated is None:
        host.noop(f"{ADDUSER_CONF}: new accounts join {' and '.join(groups)} (ADD_EXTRA_GROUPS=1)")
        return
    yield write_file_command(ADDUSER_CONF, updated)
