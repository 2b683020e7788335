"""Stage 4 as a pyinfra deploy: python3-venv, the wheelhouse (when configured: pushed over SSH, or its hashes only
when the hosts pull it, `wheelhouse_url` / `wheelhouse_serve` / from the seed host, `wheelhouse_seed`), the venv,
torch and bitsandbytes — and, unless verify_model is off, Transformers and accelerate for the model check (their
dependencies come with them, into the wheelhouse and its hashes like the rest).

The venv's path is checked first — before anything changes on the host — (also in preflight, when the whole deploy
runs): a path whose directories another account can write would let that account swap the venv
(roles/debian/path_access.py).
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import host

from roles import run_reads
from roles.debian.facts import PackageVersions, VenvPathAccess
from roles.debian.path_access import venv_path_problem
from roles.settings import HostSettings
from roles.stage import stage, stop
from roles.uploads import FileNames, FilesSha256, Upload, checked_files
from roles.validators import split_address
from roles.venv.facts import HostPython3, VenvContents
from roles.venv.model import model_check_requirements
from roles.venv.operations import python3_venv_package, venv_directory, venv_packages
from roles.venv.wheelhouse import REQUIREMENTS, prepare_wheelhouse, wheelhouse_files
from roles.venv.wheelhouse_pull import PullSource

# Where a host keeps its copy of the wheelhouse (uploaded from the controller; only changed files travel) — in pull
# mode only its requirements.txt, with the controller's hashes (roles/venv/wheelhouse_pull.py).
REMOTE_WHEELHOUSE = "/var/cache/rocm-fleet/wheelhouse"


def reads(settings: HostSettings) -> list[run_reads.Ask]:
    ask = run_reads.Ask.of
    asks = [
        ask(VenvPathAccess, path=settings.venv_path, owner=settings.venv_owner),
        ask(PackageVersions, packages=["python3-venv"]),
        ask(VenvContents, path=settings.venv_path, owner=settings.venv_owner),
    ]
    if settings.wheelhouse is not None:
        # The wheelhouse's file names depend on the host's Python (read here); their hashes are read ahead in venv().
        asks += [ask(HostPython3), ask(FileNames, directory=REMOTE_WHEELHOUSE)]
    return asks


@stage("Venv", reads=reads)
def venv(settings: HostSettings) -> None:
    problem = venv_path_problem(
        settings.venv_path,
        settings.venv_owner,
        run_reads.read(VenvPathAccess, path=settings.venv_path, owner=settings.venv_owner),
    )
    if problem:
        stop("venv path others can write", f"{host.name}: {problem}")
        return
    others = [f"bitsandbytes=={settings.bitsandbytes_version}", *model_check_requirements(settings.verify_model)]
    python3_venv_package(name="python3-venv", lock_timeout=settings.dpkg_lock_timeout)

    remote_wheelhouse = None
    pull = None
    if settings.wheelhouse is not None:
        target = run_reads.read(HostPython3, across_execution=True)
        if target is None:
            stop(
                "no python3",
                f"{host.name}: python3 is not installed, and the wheelhouse is built for the host's "
                "Python version — install python3-venv (apt-get install python3-venv) and deploy again",
            )
            return
        # Prepared on the controller while planning (also with --dry): the upload below must know its files.
        local = prepare_wheelhouse(
            Path(settings.wheelhouse), target, settings.torch_spec, settings.torch_index_url, others
        )
        uploads = [Upload(name, sha256, str(local / name)) for name, sha256 in sorted(wheelhouse_files(local).items())]
        pull = pull_source(settings, host.name)
        if pull is not None:
            # Pull mode: only the hashes travel over SSH; the wheels come from the server, checked against them.
            # delete=True: wheels an earlier push left there go.
            uploads = [upload for upload in uploads if upload.name == REQUIREMENTS]
            name = f"Wheelhouse {target.tag}: hashes (wheels pulled from {pull.find_links(target.tag)})"
        else:
            name = f"Wheelhouse {target.tag}"
        # Root-owned and world-readable: the owner's pip reads it; only root can change it.
        run_reads.read_ahead(
            [run_reads.Ask.of(FilesSha256, directory=REMOTE_WHEELHOUSE, names=[upload.name for upload in uploads])]
        )
        checked_files(name=name, directory=REMOTE_WHEELHOUSE, uploads=uploads, delete=True)
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
        pull=pull.find_links(target.tag) if pull is not None else None,
        serve=pull.serve if pull is not None else None,
        relay=(*pull.seed, REMOTE_WHEELHOUSE, target.tag) if pull is not None and pull.seed is not None else None,
    )


def pull_source(settings, host_name: str) -> PullSource | None:
    """Where this host pulls the wheelhouse from (wheelhouse_url / wheelhouse_serve / wheelhouse_seed), or None: it is
    pushed over SSH (also to the seed itself, which then serves it: roles/venv/wheelhouse_relay.py)."""
    if settings.wheelhouse is None:
        return None
    if settings.wheelhouse_seed is not None and settings.wheelhouse_seed_serve is not None:
        if settings.wheelhouse_seed == host_name:
            return None
        address, port = split_address(settings.wheelhouse_seed_serve)
        return PullSource(f"http://{settings.wheelhouse_seed_serve}", seed=(settings.wheelhouse_seed, address, port))
    if settings.wheelhouse_url is None and settings.wheelhouse_serve is None:
        return None
    serve = None
    if settings.wheelhouse_serve is not None:
        address, port = split_address(settings.wheelhouse_serve)
        serve = (settings.wheelhouse, address, port)
    url = settings.wheelhouse_url or f"http://{settings.wheelhouse_serve}"
    return PullSource(url, serve)
