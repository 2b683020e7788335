"""The verifier as one file on each host: build `verify.pyz` on the controller, upload it, run it with the host's
python3.

Shared by every stage that runs `verify/` on a host (strays, verification, the apt hook): call `upload_verifier()`
first, then run `verifier_command(...)`. The archive holds `verify/` and pyelftools (pure Python), so the host needs
nothing but python3 — no pip, no network.

The archive is byte-for-byte reproducible (sorted entries, fixed timestamps), so an unchanged checkout uploads
nothing on the next run. It is built once per controller process and kept in memory — never in a shared directory
such as /tmp, where another local account could plant a file of the expected name — and uploaded
from those bytes through a private staging directory, installed only with their sha256 (`roles/uploads.py`). Every
command that runs it on a host checks that sha256 first (`verifier_command`): a verifier from another checkout, or
one changed on the host, is never run. Several stages asking for it in one run plan the upload once per host: the
first one's upload is in place before any later stage runs.
"""

from __future__ import annotations

import functools
import hashlib
import io
import shlex
import zipfile
from pathlib import Path

import elftools
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import files

from roles import run_reads
from roles.run_memory import memory_of
from roles.uploads import FilesSha256, Upload, checked_files
from verify.api import PACKAGE_DIR

# Where the verifier lives on a host. /var/lib/rocm-fleet also holds what the apt hook writes.
REMOTE_DIR = "/var/lib/rocm-fleet"
VERIFIER_NAME = "verify.pyz"
REMOTE_VERIFIER = f"{REMOTE_DIR}/{VERIFIER_NAME}"
# Exit status of a verifier command that refused to run the file on the host (not the expected bytes): neither the
# verifier's own 0/1/2 nor a shell's 126/127.
STALE_EXIT = 3

# The archive's entry: verify/__main__.py, after putting the modules' compiled code kept on the host in use
# (verify/bytecode_cache.py: zipimport compiles every module on every run otherwise).
_MAIN = (
    b"import sys\n\nfrom verify.bytecode_cache import use_cache\n\nuse_cache()\n\n"
    b"from verify.cli import main  # noqa: E402\n\nsys.exit(main())\n"
)
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can carry: entries must not depend on file mtimes


def _package_files(package_dir: Path, arcname_root: str) -> list[tuple[str, Path]]:
    """(name in the archive, file) for every module and data file of a package, caches left out."""
    found = []
    for path in sorted(package_dir.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        found.append((f"{arcname_root}/{path.relative_to(package_dir).as_posix()}", path))
    return found


def zipapp_bytes() -> bytes:
    """The verifier archive, built from this checkout's verify/ and the installed pyelftools."""
    members = _package_files(PACKAGE_DIR, "verify")
    members += _package_files(Path(elftools.__file__).parent, "elftools")
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        entries = [("__main__.py", _MAIN)] + [(name, path.read_bytes()) for name, path in members]
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


@functools.cache
def verifier_archive() -> bytes:
    """The archive this controller process uploads, built once (its bytes and its sha256 never change in a run)."""
    return zipapp_bytes()


def verifier_sha256() -> str:
    return hashlib.sha256(verifier_archive()).hexdigest()


def stale_line() -> str:
    return (
        f"rocm-fleet: {REMOTE_VERIFIER} is not the verifier this checkout built (sha256 {verifier_sha256()[:12]}…): "
        "not run — run the deploy (or tasks/verify.py) again to upload it"
    )


def verifier_command(*arguments: str, python: str = "python3") -> str:
    """The shell command that runs the uploaded verifier with `arguments` (e.g. "strays", "--json") — only when the
    file on the host has the sha256 of the archive this controller built; otherwise one line on stderr and exit
    status STALE_EXIT. `-I`: the host's python3 ignores PYTHON* variables, the user site and the current directory;
    `-S`: nor does it import `site` — the archive needs nothing outside itself and the standard library, and site's
    .pth files (e.g. setuptools' distutils hack) cost every start ~4 ms of the host's CPU."""
    check = f"echo {shlex.quote(f'{verifier_sha256()}  {REMOTE_VERIFIER}')} | sha256sum --check --status 2>/dev/null"
    run = " ".join(shlex.quote(part) for part in (python, "-I", "-S", REMOTE_VERIFIER, *arguments))
    return f"if {check}; then {run}; else echo {shlex.quote(stale_line())} >&2; (exit {STALE_EXIT}); fi"


def upload_reads() -> list[run_reads.Ask]:
    """What the upload asks a host (for the stages' read-ahead)."""
    return [
        run_reads.Ask.of(Directory, path=REMOTE_DIR),
        run_reads.Ask.of(FilesSha256, directory=REMOTE_DIR, names=[VERIFIER_NAME]),
    ]


@deploy("Upload the verifier")
def _upload() -> None:
    # Root's own: the verifier is run by root from here, so no other account may add, swap or rename files in it.
    # Asked here, read ahead with the stage's other questions: files.directory would ask the host once more.
    directory = run_reads.ask(Directory, path=REMOTE_DIR)
    if not (
        directory
        and directory.get("user") == "root"
        and directory.get("group") == "root"
        and directory.get("mode") == 755
    ):
        files.directory(name="Verifier directory", path=REMOTE_DIR, user="root", group="root", mode="755")
    checked_files(
        name=f"Upload {REMOTE_VERIFIER}",
        directory=REMOTE_DIR,
        uploads=[Upload(VERIFIER_NAME, verifier_sha256(), verifier_archive())],
    )


def upload_verifier() -> None:
    """Plan the verifier's upload to the current host, unless an earlier stage of this run already did."""
    planned = memory_of(host.state).verifier_planned
    if host.name in planned:
        return
    planned.add(host.name)
    _upload()
