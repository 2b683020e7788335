"""ROCm facts: each a command and a call to the pure parser in roles/rocm/model.py."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from roles.rocm.model import (
    AMDGPU_LIST,
    ROCM_LIST,
    Accounts,
    RocmInstallation,
    parse_accounts,
    parse_installation,
    parse_list_files,
)


class InstalledRocm(FactBase):
    """Every ROCm tree under /opt with its .info/version, where /opt/rocm points, and dpkg's rocm-core/rocm packages
    (single-version names and the multi-version ones such as rocm-core7.2.4)."""

    def command(self) -> str:
        return (
            "for d in /opt/rocm-*; do [ -d \"$d\" ] || continue; "
            "echo \"tree $d $(head -n 1 \"$d/.info/version\" 2>/dev/null)\"; done; "
            "echo \"opt-rocm $(readlink -e /opt/rocm 2>/dev/null)\"; "
            "dpkg-query -W -f='pkg ${Package} ${Version} ${db:Status-Abbrev}\\n' "
            "'rocm-core*' rocm 'rocm[0-9]*' 2>/dev/null || true"
        )

    def process(self, output) -> RocmInstallation:
        return parse_installation(output)

    @staticmethod
    def default() -> RocmInstallation:
        return RocmInstallation(trees=(), opt_rocm="", packages=())


class RocmAptLists(FactBase):
    """The contents of the apt lists amdgpu-install writes (absent files are absent from the dict)."""

    default = dict

    def command(self) -> str:
        return (f"for f in {ROCM_LIST} {AMDGPU_LIST}; do if [ -f \"$f\" ]; then echo \"==> $f\"; cat \"$f\"; fi; "
                "done")

    def process(self, output) -> dict[str, str]:
        return parse_list_files(output)


class GroupAccounts(FactBase):
    """Which of the named groups exist, and every group of each named user (or that the user does not exist)."""

    def command(self, users, groups) -> str:
        group_names = " ".join(shlex.quote(g) for g in groups)
        user_names = " ".join(shlex.quote(u) for u in users)
        return (
            f"for g in {group_names}; do getent group \"$g\" >/dev/null && echo \"group $g\"; done; "
            f"for u in {user_names}; do echo \"user $u: $(id -nG \"$u\" 2>/dev/null || echo '?')\"; done; true"
        )

    def process(self, output) -> Accounts:
        return parse_accounts(output)

    @staticmethod
    def default() -> Accounts:
        return Accounts(groups=frozenset(), memberships={})
