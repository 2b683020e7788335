"""Shell commands that run apt/dpkg (directly or through amdgpu-install) with a bounded wait for a busy lock (pure).

pyinfra 3.10's apt operations do not wait for the lock: a host where unattended-upgrades is running fails at once.
Every package command here runs with `DPkg::Lock::Timeout` set through APT_CONFIG — a one-line configuration file
made for the command — so apt-get and the apt-get that amdgpu-install calls inside both wait up to the timeout, and
a command that still fails on a lock (apt-get update does not wait for its own) is retried until the timeout. When it
is still locked after that, the command fails and adds one line that says so and what to do.

A dpkg run that was interrupted (killed, or the machine lost power, halfway through) leaves its journal in
/var/lib/dpkg/updates/, and apt then refuses every package operation until `dpkg --configure -a` has finished it. The
wrapper recognises apt's line for that and adds one line naming the fix; it does not run the fix itself. Finishing
another run's transaction runs the maintainer scripts of whatever packages it left halfway — packages this deploy did
not plan, that `--dry` could not show, and that an administrator may be in the middle of repairing by hand — so it is
for a person to decide, with one command for the whole fleet (INTERRUPTED_FIX).

A lock failure is recognised by apt's final error lines, in English (the command runs with LC_ALL=C.UTF-8 and no
LANGUAGE, so a workstation set to German is read the same way). Not by "Could not get lock …": once apt has waited,
that text is only in its "Waiting for cache lock: …" progress lines, and apt 2.6 writes those to a pipe or file only
when an uninitialised flag happens to be set (OpProgress::MajorChange, read in quiet mode), so a run may show none.
"""

from __future__ import annotations

import shlex

# apt's error lines when another process holds a lock; each is printed on every lock failure:
LOCK_SIGNATURES = (
    "Could not get lock",  # a lock apt does not wait for (the package lists' in `apt-get update`), or no timeout
    "is another process using it?",  # after waiting: "Unable to acquire the dpkg frontend lock (…), is another
    # process using it?" and "Unable to lock the administration directory (…), is another process using it?"
)
# apt's error line when dpkg's journal holds an unfinished run (apt-pkg/deb/debsystem.cc, in English):
INTERRUPTED_SIGNATURE = "dpkg was interrupted, you must manually run"
INTERRUPTED_FIX = "pyinfra INVENTORY exec -- env DEBIAN_FRONTEND=noninteractive dpkg --configure -a"
APT_GET = (
    "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
)


def lock_expired_message(timeout: int) -> str:
    return (
        f"rocm-fleet: apt/dpkg was still locked after {timeout} s (dpkg_lock_timeout): another apt/dpkg run is "
        "busy on this host; let it finish (or raise dpkg_lock_timeout) and deploy again"
    )


def interrupted_message() -> str:
    return (
        "rocm-fleet: an earlier dpkg run on this host was interrupted halfway, and apt changes nothing until it is "
        "finished: run `dpkg --configure -a` there as root (for the whole fleet: "
        f"{INTERRUPTED_FIX}), then deploy again"
    )


def with_dpkg_lock_timeout(command: str, timeout: int) -> str:
    """Wrap `command` (sh) so that apt inside it waits up to `timeout` seconds for a lock held by another apt/dpkg run,
    and a failure that is a lock, or an interrupted dpkg run, says so in one line that names the fix. The command's
    output is printed after it ends (pyinfra shows it on failure).

    apt waits for the dpkg lock itself (DPkg::Lock::Timeout), but `apt-get update` fails at once on the lock of the
    package lists: a failure that names a lock is therefore retried every 5 s until `timeout` has passed. Retrying is
    safe because apt changes nothing when it cannot take its lock.
    """
    timeout = int(timeout)
    config = shlex.quote(f'DPkg::Lock::Timeout "{timeout}";')
    message = shlex.quote(lock_expired_message(timeout))
    locked = "grep -q -F " + " ".join(f"-e {shlex.quote(text)}" for text in LOCK_SIGNATURES) + ' "$log"'
    interrupted = f'grep -q -F -e {shlex.quote(INTERRUPTED_SIGNATURE)} "$log"'
    return (
        f'cfg=$(mktemp) && log=$(mktemp) && echo {config} > "$cfg" && '
        'export APT_CONFIG="$cfg" DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 && unset LANGUAGE && '
        "start=$(date +%s) && "
        f'while :; do ( {command} ) > "$log" 2>&1; rc=$?; '
        f'if [ "$rc" -ne 0 ] && {locked} && [ $(( $(date +%s) - start )) -lt {timeout} ]; then sleep 5; '
        'else break; fi; done; cat "$log"; '
        f'if [ "$rc" -ne 0 ] && {locked}; then echo {message} >&2; fi; '
        f'if [ "$rc" -ne 0 ] && {interrupted}; then echo {shlex.quote(interrupted_message())} >&2; fi; '
        'rm -f "$cfg" "$log"; exit "$rc"'
    )


def apt_get(arguments: str, timeout: int) -> str:
    """`apt-get -y ARGUMENTS`, non-interactive, keeping changed configuration files, waiting for the lock."""
    return with_dpkg_lock_timeout(f"{APT_GET} {arguments}", timeout)
