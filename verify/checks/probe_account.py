"""Who runs the venv's code: the account the runtime probe (and NF4) runs as.

The venv belongs to its owner (`venv_owner`, an ordinary account), while the verifier runs as root — in the
verification stage and in the boot-time check. Root never runs the venv's python: a .pth file the owner dropped into
site-packages would run as uid 0. So the probe runs as the owner (`ProbeAccount`: its uid, gid and every group it is
in — render and video reach the GPU as the owner would — with the owner's HOME, USER, LOGNAME, SHELL and a default
PATH, cwd /), switched by Python's own subprocess (`user`/`group`/`extra_groups`: setgroups, setregid, setreuid in the
child before exec) — the verifier is standard library only and needs no setpriv or runuser on the host. The account
is `--probe-user` (the controller and the boot unit pass venv_owner), else — by hand — the owner of the venv's
directory when run as root, or the caller itself. Root runs it as root only for a venv nothing of which another
account owns or can write (`root_probe_refusal`). The report names the account (`facts.probe_account`).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.report.report import ProbeAccountFacts

# What the probe of another account gets from the caller's environment: what selects GPUs and libraries, the locale.
# The rest (HOME, PATH, SUDO_*, PYTHON* …) is root's, not the owner's.
PASSED_TO_OWNER = (
    "HIP_",
    "ROCR_",
    "HSA_",
    "GPU_",
    "AMD_",
    "CUDA_",
    "BNB_",
    "PYTORCH_",
    "OMP_",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LANG",
    "LC_",
)
OWNER_PATH = "/usr/local/bin:/usr/bin:/bin"


class ProbeAccountError(ValueError):
    """The account to run the probe as cannot be used (bad input, exit code 2); one line naming it and the fix."""


@dataclass(frozen=True)
class ProbeAccount:
    """The account the runtime probe runs as."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]  # every group it is in (initgroups), its primary group included
    home: str
    shell: str

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> ProbeAccount:
        groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, entry.pw_shell or "/bin/sh")

    def group_names(self) -> tuple[str, ...]:
        names = []
        for gid in self.groups:
            try:
                names.append(grp.getgrgid(gid).gr_name)
            except KeyError:
                names.append(str(gid))
        return tuple(names)

    def facts(self) -> ProbeAccountFacts:
        """What the report says about it (facts.probe_account)."""
        return ProbeAccountFacts(self.user, self.uid, self.group_names())

    def switch(self) -> dict:
        """subprocess arguments that run a child as this account — none when it is this process's own."""
        if self.uid == os.geteuid():
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The child's environment: `environ` as it is for this process's own account, else the owner's."""
        if self.uid == os.geteuid():
            return dict(environ)
        env = {key: value for key, value in environ.items() if key.startswith(PASSED_TO_OWNER)}
        env.update(HOME=self.home, USER=self.user, LOGNAME=self.user, SHELL=self.shell, PATH=OWNER_PATH)
        return env


def probe_account(requested: str | None, venv_root: Path) -> ProbeAccount:
    """The account to run the probe as: `requested` (the controller passes venv_owner), else — run by hand — the
    owner of the venv's directory when this is root, or this process's own account."""
    euid = os.geteuid()
    try:
        if requested is not None:
            entry = pwd.getpwnam(requested)
        elif euid == 0:
            entry = pwd.getpwuid(os.stat(venv_root).st_uid)
        else:
            entry = pwd.getpwuid(euid)
    except KeyError:
        what = f"account {requested!r}" if requested is not None else f"the owner of {venv_root}"
        raise ProbeAccountError(f"--probe-user: {what} does not exist — pass the venv's owner (venv_owner)") from None
    except OSError as error:
        raise ProbeAccountError(f"{venv_root}: {error.strerror}") from None
    if euid != 0 and entry.pw_uid != euid:
        raise ProbeAccountError(
            f"--probe-user {entry.pw_name}: only root can run the probe as another account — "
            f"run the check as {entry.pw_name}, or as root"
        )
    return ProbeAccount.of(entry)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def root_probe_refusal(venv_root: Path) -> str | None:
    """Why root must not run the probe in this venv: its first entry owned by, or writable by, an account other than
    root (a .pth file there runs at interpreter start); None when it is root's alone. Nothing is followed, and only
    directories are opened (O_DIRECTORY | O_NOFOLLOW), to list them. Each entry is looked at (lstat) through its
    directory's descriptor, not by its whole path: a venv with torch has ~25,000 entries, ~10 directories deep, and
    the kernel then resolves one name each instead of all of them (110 against 165 ms of a local host's CPU)."""
    top = os.fspath(venv_root)
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            # The venv's own path may be a link (as `find -H`): it is what the probe's python runs from.
            descriptor = os.open(directory, _DIRECTORY & ~os.O_NOFOLLOW if directory == top else _DIRECTORY)
        except OSError:
            continue  # gone, or replaced by a link: nothing to list (as os.walk, which this replaced, skipped it)
        try:
            with os.scandir(descriptor) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)  # fstatat(descriptor, name, AT_SYMLINK_NOFOLLOW)
                    except OSError:
                        continue
                    mode = info.st_mode
                    writable = not stat.S_ISLNK(mode) and (
                        mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid != 0)
                    )
                    if info.st_uid != 0 or writable:
                        return _refusal(os.path.join(directory, entry.name), info)
                    if stat.S_ISDIR(mode):
                        pending.append(os.path.join(directory, entry.name))
        finally:
            os.close(descriptor)
    return None


def _refusal(path: str, info: os.stat_result) -> str:
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = f"uid {info.st_uid}"
    why = f"belongs to {owner}" if info.st_uid != 0 else "is writable by other accounts"
    return (
        f"not run as root: {path} {why}, and code in the venv would run as root — pass --probe-user "
        f"with the venv's owner (venv_owner), or rebuild the venv as root's"
    )
