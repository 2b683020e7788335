"""Stage 4 as a pyinfra deploy: python3-venv, the wheelhouse (when configured), the venv, torch and bitsandbytes."""

from __future__ import annotations

from pathlib import Path

from pyinfra import host
from pyinfra.operations import files

from roles.settings import HostSettings
from roles.stage import stage, stop
from roles.venv.facts import HostPython3
from roles.venv.operations import python3_venv_package, venv_directory, venv_packages
from roles.venv.wheelhouse import prepare_wheelhouse

# Where a host keeps its copy of the wheelhouse (synced from the controller; only changed files travel).
REMOTE_WHEELHOUSE = "/var/cache/rocm-fleet/wheelhouse"


@stage("Venv")
def venv(settings: HostSettings) -> None:
    others = [f"bitsandbytes=={settings.bitsandbytes_version}"]
    python3_venv_package(name="python3-venv", lock_timeout=settings.dpkg_lock_timeout)

    remote_wheelhouse = None
    if settings.wheelhouse is not None:
        target = host.get_fact(HostPython3)
        if target is None:
            stop("no python3", f"{host.name}: python3 is not installed, and the wheelhouse is built for the host's "
                               "Python version — install python3-venv (apt-get install python3-venv) and deploy again")
            return
        # Prepared on the controller while planning (also with --dry): the sync below must know its files.
        local = prepare_wheelhouse(Path(settings.wheelhouse), target, settings.torch_spec, settings.torch_index_url,
                                   others)
        files.sync(name=f"Wheelhouse {target.tag}", src=str(local), dest=REMOTE_WHEELHOUSE, delete=True,
                   exclude=[".complete.json"])
        remote_wheelhouse = REMOTE_WHEELHOUSE

    venv_directory(name=f"venv {settings.venv_path}", path=settings.venv_path, owner=settings.venv_owner)
    label = f" ({settings.torch_label})" if settings.torch_label else ""
    venv_packages(
        name=f"{settings.torch_spec}{label}, {', '.join(others)}",
        path=settings.venv_path,
        torch_spec=settings.torch_spec,
        other_requirements=others,
        owner=settings.venv_owner,
        torch_index_url=settings.torch_index_url,
        wheelhouse=remote_wheelhouse,
    )
