"""Running the venv's code as the venv's owner: root never executes what another account can write.

`account(name)` reads the account from the passwd and group databases (through NSS, so directory accounts work too);
`Account.subprocess_arguments()` are the `subprocess.run` arguments that switch the child to it (uid, gid and its
supplementary groups — render and video give it the GPUs) before anything runs; `Account.environment()` is the
caller's environment with HOME, USER and LOGNAME made the account's, so that nothing it writes lands in root's home.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Any, Mapping


class AccountError(ValueError):
    """An account that cannot be used: unknown, or one this process cannot switch to."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def subprocess_arguments(self) -> dict[str, Any]:
        if os.geteuid() == self.uid:
            return {}  # already this account: nothing to switch (and no right to set groups)
        if os.geteuid() != 0:
            raise AccountError(f"cannot run as {self.name}: this process (uid {os.geteuid()}) is not root")
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update(HOME=self.home, USER=self.name, LOGNAME=self.name)
        return env


def account(name: str) -> Account:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise AccountError(f"no account {name!r} on this host") from None
    groups = tuple(sorted(set(os.getgrouplist(name, entry.pw_gid))))
    return Account(name=name, uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, home=entry.pw_dir)
