"""Operations of the venv stage. Each reads its facts in its body (when planning, and again when it runs, after the
operations before it have run), so a fresh host plans "create" and a provisioned one plans nothing.

Who runs what: the venv is `owner`'s (venv_owner, an ordinary account), so everything that runs the venv's code or
writes into it — `python3 -m venv`, pip — runs as the owner (`as_owner`). Root only creates the directory (where the
directories above it are root's) and removes a venv that is not the owner's; it never runs, imports or chowns anything
in it. With owner root nothing switches.
"""

from __future__ import annotations

import posixpath
import shlex

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.debian.apt_commands import apt_get
from roles.debian.facts import PackageVersions, VenvPathAccess
from roles.venv.facts import HostPython3, VenvContents
from roles.venv.model import describe_installed, plan_venv, unmet
from roles.venv.wheelhouse_pull import pull_install, serve_command
from roles.venv.wheelhouse_relay import relay_command

# --isolated: the owner's pip configuration and PIP_* variables do not choose what this deploy installs (the site-wide
# /etc/pip.conf, the admin's, still applies); -I: nor do PYTHON* variables or the current directory.
PIP = "-I -m pip install --isolated --disable-pip-version-check --no-input"
REQUIREMENTS = "requirements.txt"  # in the wheelhouse: every wheel with its sha256 (roles/venv/wheelhouse.py)


def as_owner(owner: str, command: str) -> str:
    """`command` run as `owner` with the owner's groups and environment; unchanged for root.

    setpriv (util-linux, Essential on Debian and Ubuntu) sets the uid, the gid and every group of the account
    (initgroups: render and video included) and replaces root's environment with the account's (HOME, USER, LOGNAME,
    SHELL, a default PATH) — no PAM session, no login shell, no password. `runuser -u` would do the same through
    PAM. `cd /`: the admin's working directory may be one the owner cannot read.
    """
    if owner == "root":
        return command
    user = shlex.quote(owner)
    return (
        f'cd / && setpriv --reuid={user} --regid="$(id -g -- {user})" --init-groups --reset-env -- '
        f"sh -c {shlex.quote(command)}"
    )


@operation()
def python3_venv_package(lock_timeout: int = 300):
    """Debian's python3-venv (venv + ensurepip for the system python3) is installed."""
    installed = run_reads.ask(PackageVersions, packages=["python3-venv"])
    if "python3-venv" in installed:
        host.noop(f"python3-venv {installed['python3-venv'].version} is installed")
        return
    # Only when something is to be installed: a fresh host may have no package lists yet.
    yield apt_get("update", lock_timeout)
    yield apt_get("install python3-venv", lock_timeout)


def _in_checked_parent(parent: str, resolved: str, owner: str, command: str) -> str:
    """Run `command` (relative names only) as root in `parent`, after checking it is still the directory preflight
    judged (its resolved path) and root's or the owner's: from there on a rename of anything above cannot redirect
    it."""
    return (
        f'cd -P -- {shlex.quote(parent)} && [ "$(pwd -P)" = {shlex.quote(resolved)} ] && '
        f'case "$(stat -c %u .)" in 0|"$(id -u -- {shlex.quote(owner)})") true;; *) false;; esac && '
        f"{command}"
    )


@operation()
def venv_directory(path: str, owner: str = "root"):
    """A working venv at `path`, made by the host's python3 as `owner`, everything in it `owner`'s."""
    contents = run_reads.ask(VenvContents, path=path, owner=owner)
    # The venv stage read the host's python3 while planning; installing python3-venv since cannot change its minor
    # version (all plan_venv compares), but it does install a python3 that was missing then: ask again for None.
    host_python = run_reads.read(HostPython3, across_execution=True) or run_reads.ask(HostPython3)
    plan = plan_venv(path, contents, host_python, owner)
    if plan.action is None:
        host.noop(plan.reason)
        run_reads.keep(VenvContents, contents, path=path, owner=owner)  # unchanged: venv_packages reads this
        return
    access = run_reads.ask(VenvPathAccess, path=path, owner=owner)
    parent, name = posixpath.split(path)
    resolved = access.resolved_parent or parent
    quoted = shlex.quote(path)
    if plan.action == "recreate":
        yield as_owner(owner, f"python3 -I -m venv --clear {quoted}")
        return
    if plan.action == "replace":
        # rm never follows a symlink; from inside the checked parent it can only remove what is in there.
        yield _in_checked_parent(parent, resolved, owner, f"rm -rf -- {shlex.quote(name)}")
    if owner == "root" or access.owner_makes_it():
        # Root's venv, or one in the owner's own directory: its owner makes it (root does not act in there).
        yield as_owner(owner, f"mkdir -p -- {quoted} && python3 -I -m venv {quoted}")
        return
    # A root-owned parent (preflight refused any other): root makes the empty directory and gives it to the owner —
    # `chown -h` on the name just made, in a directory nobody else can write — and the owner fills it.
    yield f"mkdir -p -- {shlex.quote(parent)}"
    yield _in_checked_parent(
        parent,
        resolved,
        owner,
        f"{{ [ -d {shlex.quote(name)} ] || mkdir -m 755 -- {shlex.quote(name)}; }} && "
        f"chown -h -- {shlex.quote(owner)}: {shlex.quote(name)}",
    )
    yield as_owner(owner, f"python3 -I -m venv {quoted}")


@operation()
def venv_packages(
    path: str,
    torch_spec: str,
    other_requirements: list[str],
    owner: str = "root",
    torch_index_url: str | None = None,
    wheelhouse: str | None = None,
    pull: str | None = None,
    serve: tuple[str, str, int] | None = None,
    relay: tuple[str, str, int, str, str] | None = None,
):
    """torch (`torch_spec`) and `other_requirements` are installed in the venv at `path`, by pip run as `owner`.

    wheelhouse: a directory on the host; pip installs from it alone (`--no-index`) exactly the wheels of its
    requirements.txt, each with the sha256 the controller computed (`--require-hashes`). Otherwise torch comes from
    `torch_index_url` alone (with its dependencies, as PyTorch documents) and the rest from pip's configured index:
    then nothing of ours is hash-checked — pip checks what the index itself states (TLS, and its `#sha256=` links).
    pull: the wheels come from this URL (`--find-links`), still only with the hashes of the host's requirements.txt;
    serve: the controller's own server to start first for it (roles/venv/wheelhouse_pull.py); relay: a seed host's
    server instead — (seed, address, port, the seed's wheelhouse directory, the set): roles/venv/wheelhouse_relay.py.
    """
    requirements = [torch_spec, *other_requirements]
    contents = run_reads.take(VenvContents, path=path, owner=owner)
    installed = contents.packages if contents is not None else {}
    missing = unmet(requirements, installed)
    if not missing:
        host.noop(f"installed: {describe_installed(requirements, installed)}")
        return
    python = shlex.quote(f"{path}/bin/python")
    if wheelhouse is not None and pull is not None:
        if serve is not None:
            yield serve_command(serve)
        if relay is not None:
            yield relay_command(*relay)
        yield as_owner(owner, pull_install(f"{python} {PIP}", pull, posixpath.join(wheelhouse, REQUIREMENTS)))
        return
    if wheelhouse is not None:
        listed = shlex.quote(posixpath.join(wheelhouse, REQUIREMENTS))
        yield as_owner(
            owner, f"{python} {PIP} --no-index --find-links {shlex.quote(wheelhouse)} --require-hashes -r {listed}"
        )
        return
    if torch_spec in missing:
        index = f" --index-url {shlex.quote(torch_index_url)}" if torch_index_url else ""
        yield as_owner(owner, f"{python} {PIP}{index} {shlex.quote(torch_spec)}")
    others = [spec for spec in other_requirements if spec in missing]
    if others:
        # torch is already in place: pip leaves a met requirement alone, so no other torch build can come in here.
        yield as_owner(owner, f"{python} {PIP} {' '.join(shlex.quote(spec) for spec in others)}")
