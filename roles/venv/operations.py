"""Operations of the venv stage. Each reads its facts in its body (when planning, and again when it runs, after the
operations before it have run), so a fresh host plans "create" and a provisioned one plans nothing."""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.api import operation

from roles.debian.apt_commands import apt_get
from roles.debian.facts import PackageVersions
from roles.venv.facts import HostPython3, VenvContents
from roles.venv.model import describe_installed, plan_venv, unmet

PIP = "-m pip install --disable-pip-version-check --no-input"


def _chown(path: str, owner: str) -> str:
    # ':' after the user: also the user's login group. Everything pip wrote as root becomes the owner's.
    return f"chown -R {shlex.quote(owner)}: {shlex.quote(path)}"


@operation()
def python3_venv_package(lock_timeout: int = 300):
    """Debian's python3-venv (venv + ensurepip for the system python3) is installed."""
    installed = host.get_fact(PackageVersions, packages=["python3-venv"])
    if "python3-venv" in installed:
        host.noop(f"python3-venv {installed['python3-venv'].version} is installed")
        return
    # Only when something is to be installed: a fresh host may have no package lists yet.
    yield apt_get("update", lock_timeout)
    yield apt_get("install python3-venv", lock_timeout)


@operation()
def venv_directory(path: str, owner: str = "root"):
    """A working venv at `path`, made by the host's python3, owned by `owner`."""
    contents = host.get_fact(VenvContents, path=path)
    broken = contents == "broken"
    plan = plan_venv(path, None if broken else contents, broken, host.get_fact(HostPython3), owner)
    if plan.action is None:
        host.noop(plan.reason)
        return
    if plan.action in ("create", "recreate"):
        clear = " --clear" if plan.action == "recreate" else ""
        yield f"python3 -m venv{clear} {shlex.quote(path)} && {_chown(path, owner)}"
    else:
        yield _chown(path, owner)


@operation()
def venv_packages(path: str, torch_spec: str, other_requirements: list[str], owner: str = "root",
                  torch_index_url: str | None = None, wheelhouse: str | None = None):
    """torch (`torch_spec`) and `other_requirements` are installed in the venv at `path`.

    wheelhouse: a directory on the host; pip installs from it alone (`--no-index`). Otherwise torch comes from
    `torch_index_url` alone (with its dependencies, as PyTorch documents) and the rest from pip's configured index.
    """
    requirements = [torch_spec, *other_requirements]
    contents = host.get_fact(VenvContents, path=path)
    installed = contents.packages if contents not in (None, "broken") else {}
    missing = unmet(requirements, installed)
    if not missing:
        host.noop(f"installed: {describe_installed(requirements, installed)}")
        return
    python = shlex.quote(f"{path}/bin/python")
    if wheelhouse is not None:
        specs = " ".join(shlex.quote(spec) for spec in requirements)
        yield f"{python} {PIP} --no-index --find-links {shlex.quote(wheelhouse)} {specs} && {_chown(path, owner)}"
        return
    if torch_spec in missing:
        index = f" --index-url {shlex.quote(torch_index_url)}" if torch_index_url else ""
        yield f"{python} {PIP}{index} {shlex.quote(torch_spec)}"
    others = [spec for spec in other_requirements if spec in missing]
    if others:
        # torch is already in place: pip leaves a met requirement alone, so no other torch build can come in here.
        yield f"{python} {PIP} {' '.join(shlex.quote(spec) for spec in others)}"
    yield _chown(path, owner)
