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

LOCK_FILE is root's alone: mode 0600 in LOCK_DIR, a directory of /run of mode 0700. flock() needs only a descriptor,
and a read-only one will do: a lock file that another account can open is a lock that account can hold, and every
run would then wait for it and skip its changes. /run itself only root can write to (unlike /tmp and /run/lock, where
another account could plant the file or a symlink), and it is emptied at boot: no lock outlives a boot. Only root's
own commands can take it, so the holder's record is trustworthy: when the wait runs out, the line names the holder's
pid, the account that started it and since when.
"""

from __future__ import annotations

import shlex

LOCK_DIR = "/run/rocm-fleet"
LOCK_FILE = f"{LOCK_DIR}/lock"


# Makes the lock's directory and file root's alone (also where an older version left them open to all).
PRIVATE = f"( umask 077 && mkdir -p {LOCK_DIR} && chmod 0700 {LOCK_DIR} && : >> {LOCK_FILE} && chmod 0600 {LOCK_FILE} )"


def lock_held_message(timeout: int, what: str) -> str:
    """The line a command prints when another run still holds the lock after `timeout` seconds (without the holder,
    which the shell appends)."""
    return (
        f"rocm-fleet: another rocm-fleet run still holds {LOCK_FILE} after {timeout} s (dpkg_lock_timeout), so "
        f"{what} was not changed: let that run finish (or raise dpkg_lock_timeout) and deploy again — it is"
    )


def under_host_lock(command: str, timeout: int, what: str) -> str:
    """`command` (sh), run whole while this host's lock is held; waits up to `timeout` seconds for another holder.

    `what` names what the command changes ("the apt hook"), for the line printed when the wait runs out. The lock's
    directory and file are made private first (in a subshell of their own: `command` keeps the caller's umask). The
    lock is opened for appending (opening it must not wipe the holder's record), and the holder's record — "changing
    WHAT for USER since TIME (pid N)" — is written once the lock is taken.
    """
    timeout = int(timeout)
    message = shlex.quote(lock_held_message(timeout, what))
    record = shlex.quote(f"changing {what}")
    return (
        f"{PRIVATE} && "
        f'( if ! flock -w {timeout} 9; then echo {message} "$(cat {LOCK_FILE})" >&2; exit 1; fi; '
        f'echo {record} "for ${{SUDO_USER:-$(id -un)}} since $(date -u +%Y-%m-%dT%H:%M:%SZ) (pid $$)" '
        f"> {LOCK_FILE}; {command} ) 9>> {LOCK_FILE}"
    )
