"""Shell commands that run apt/dpkg (directly or through amdgpu-install) with a bounded wait for the dpkg lock (pure).

pyinfra 3.10's apt operations do not wait for the lock: a host where unattended-upgrades is running fails at once.
Every package command here runs with `DPkg::Lock::Timeout` set through APT_CONFIG — a one-line configuration file
made for the command — so apt-get and the apt-get that amdgpu-install calls inside both wait up to the timeout.
When the lock is still held after that, the command fails and adds one line that says so and what to do.
"""

from __future__ import annotations

import shlex

LOCK_SIGNATURE = "Could not get lock"  # apt's message when the lock stays held (E: Could not get lock /var/lib/dpkg/…)
APT_GET = ("DEBIAN_FRONTEND=noninteractive apt-get -y "
           "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold")


def lock_expired_message(timeout: int) -> str:
    return (f"rocm-fleet: the dpkg lock was still held after {timeout} s (dpkg_lock_timeout): another apt/dpkg run "
            "is busy on this host; let it finish (or raise dpkg_lock_timeout) and deploy again")


def with_dpkg_lock_timeout(command: str, timeout: int) -> str:
    """Wrap `command` (sh) so that apt inside it waits up to `timeout` seconds for the dpkg lock, and a failure that
    is the lock says so in one line. The command's output is printed after it ends (pyinfra shows it on failure)."""
    config = shlex.quote(f'DPkg::Lock::Timeout "{int(timeout)}";')
    message = shlex.quote(lock_expired_message(timeout))
    return (
        f"cfg=$(mktemp) && log=$(mktemp) && echo {config} > \"$cfg\" && "
        f"export APT_CONFIG=\"$cfg\" DEBIAN_FRONTEND=noninteractive && "
        f"( {command} ) > \"$log\" 2>&1; rc=$?; cat \"$log\"; "
        f"if [ \"$rc\" -ne 0 ] && grep -q {shlex.quote(LOCK_SIGNATURE)} \"$log\"; then echo {message} >&2; fi; "
        "rm -f \"$cfg\" \"$log\"; exit \"$rc\""
    )


def apt_get(arguments: str, timeout: int) -> str:
    """`apt-get -y ARGUMENTS`, non-interactive, keeping changed configuration files, waiting for the lock."""
    return with_dpkg_lock_timeout(f"{APT_GET} {arguments}", timeout)
