"""ROCm facts: each a command and a call to the pure parser in roles/rocm/model.py."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from roles.rocm.model import AMDGPU_LIST, ROCM_LIST, Accounts, parse_accounts, parse_list_files


class RocmAptLists(FactBase):
    """The contents of the apt lists amdgpu-install writes (absent files are absent from the dict)."""

    default = dict

    def command(self) -> str:
        return f'for f in {ROCM_LIST} {AMDGPU_LIST}; do if [ -f "$f" ]; then echo "==> $f"; cat "$f"; fi; done'

    def process(self, output) -> dict[str, str]:
        return parse_list_files(output)


class GroupAccounts(FactBase):
    """Which of the named groups exist, and every group of each named user (or that the user does not exist)."""

    def command(self, users, groups) -> str:
        group_names = " ".join(shlex.quote(g) for g in groups)
        user_names = " ".join(shlex.quote(u) for u in users)
        return (
            f'for g in {group_names}; do getent group "$g" >/dev/null && echo "group $g"; done; '
            f'for u in {user_names}; do echo "user $u: $(id -nG "$u" 2>/dev/null || echo \'?\')"; done; true'
        )

    def process(self, output) -> Accounts:
        return parse_accounts(output)

    @staticmethod
    def default() -> Accounts:
        return Accounts(groups=frozenset(), memberships={})


class AptPreferences(FactBase):
    """The text of /etc/apt/preferences and of the files apt reads in /etc/apt/preferences.d (no extension, or
    .pref), each after a `==> PATH` line; processed into whether one pins AMD's origin (roles/rocm/driver.py)."""

    def command(self) -> str:
        return (
            'for f in /etc/apt/preferences /etc/apt/preferences.d/*; do [ -f "$f" ] || continue; '
            'case "${f##*/}" in *.pref|preferences) ;; *.*) continue ;; esac; '
            'echo "==> $f"; cat "$f"; echo; done'
        )

    def process(self, output) -> list[str]:
        return list(output)

    @staticmethod
    def default() -> list[str]:
        return []


class AdduserConf(FactBase):
    """/etc/adduser.conf, as it is (None when it does not exist)."""

    def command(self) -> str:
        return "if [ -f /etc/adduser.conf ]; then echo '==> /etc/adduser.conf'; cat /etc/adduser.conf; fi"

    def process(self, output) -> str | None:
        lines = list(output)
        if not lines or lines[0] != "==> /etc/adduser.conf":
            return None
        return "\n".join(lines[1:]) + "\n"

    @staticmethod
    def default() -> None:
        return None
