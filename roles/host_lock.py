"""One lock per host around rocm-fleet's multi-step changes of shared files, so that two runs on one host at once
never interleave them (pure: builds shell text, runs nothing).

A pyinfra run is a sequence of separate commands over SSH: no process on the host lives as long as the run, so a lock
held for the whole run would need a holder process of its own — one that a controller killed halfway would leave
behind, blocking every later run. Instead each composite command (e.g. the verifier's install: unpack, compile and
swap in a new version; the apt hook's: replace the apt configuration, record the baseline) runs whole under `flock`
on LOCK_FILE. A second run waits until the first has finished that command, and its own command then starts from the
files as the first one left them. When
the lock is still held after the timeout, the command fails with one line naming the run that holds it (recorded in
the lock file by every holder).

LOCK_FILE is in /run: a directory only root can write to, on every system (unlike /tmp and /run/lock, which every
account can write to, so another account could plant the file or a symlink there), and emptied at boot, as no lock
outlives a boot.
"""

from __future__ import annotations

import shlex

LOCK_FILE = "/run/rocm-fleet.lock"


def lock_held_message(timeout: int, what: str) -> str:
    """The line a command prints when another run still holds the lock after `timeout` seconds (without the holder,
    which the shell appends)."""
    return (
        f"rocm-fleet: another rocm-fleet run still holds {LOCK_FILE} after {timeout} s (dpkg_lock_timeout), so "
        f"{what} was not changed: let that run finish (or raise dpkg_lock_timeout) and deploy again — it is"
    )


def under_host_lock(command: str, timeout: int, what: str) -> str:
    """`command` (sh), run whole while this host's lock is held; waits up to `timeout` seconds for another holder.

    `what` names what the command changes ("the apt hook"), for the line printed when the wait runs out. The lock is
    opened for appending (opening it must not wipe the holder's record), and the holder's record — "changing WHAT for
    USER since TIME (pid N)" — is written once the lock is taken.
    """
    timeout = int(timeout)
    message = shlex.quote(lock_held_message(timeout, what))
    record = shlex.quote(f"changing {what}")
    return (
        f'( if ! flock -w {timeout} 9; then echo {message} "$(cat {LOCK_FILE})" >&2; exit 1; fi; '
        f'echo {record} "for ${{SUDO_USER:-$(id -un)}} since $(date -u +%Y-%m-%dT%H:%M:%SZ) (pid $$)" '
        f"> {LOCK_FILE}; {command} ) 9>> {LOCK_FILE}"
    )
