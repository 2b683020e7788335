"""The verifier as one file on each host: build `verify.pyz` on the controller, upload it, run it with the host's python3.

Shared by every stage that runs `verify/` on a host (strays, verification, the apt hook): call `upload_verifier()`
first, then run `verifier_command(...)`. The archive holds `verify/` and pyelftools (pure Python), so the host needs
nothing but python3 — no pip, no network.

The archive is byte-for-byte reproducible (sorted entries, fixed timestamps): pyinfra's `files.put` compares
checksums, so an unchanged checkout uploads nothing on the next run. Several stages asking for it in one run plan the
upload once per host: the first one's upload is in place before any later stage runs.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shlex
import tempfile
import zipfile
from pathlib import Path

import elftools
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files

from roles.run_memory import memory_of
from verify.api import PACKAGE_DIR

# Where the verifier lives on a host. /var/lib/rocm-fleet also holds what the apt hook writes.
REMOTE_DIR = "/var/lib/rocm-fleet"
REMOTE_VERIFIER = f"{REMOTE_DIR}/verify.pyz"

_MAIN = b"import sys\n\nfrom verify.cli import main\n\nsys.exit(main())\n"
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
def build_zipapp() -> Path:
    """Write the archive once per controller process and return its path (named by content, so concurrent runs of
    different checkouts never overwrite each other's file)."""
    data = zipapp_bytes()
    cache = Path(tempfile.gettempdir()) / f"rocm-fleet-{os.getuid()}"
    cache.mkdir(mode=0o700, exist_ok=True)
    target = cache / f"verify-{hashlib.sha256(data).hexdigest()[:16]}.pyz"
    if not target.is_file():
        partial = cache / f".{target.name}.{os.getpid()}"
        partial.write_bytes(data)
        os.replace(partial, target)
    return target


def verifier_command(*arguments: str, python: str = "python3") -> str:
    """The shell command that runs the uploaded verifier with `arguments` (e.g. "strays", "--json")."""
    return " ".join(shlex.quote(part) for part in (python, REMOTE_VERIFIER, *arguments))


@deploy("Upload the verifier")
def _upload() -> None:
    files.directory(name="Verifier directory", path=REMOTE_DIR, mode="755")
    files.put(name=f"Upload {REMOTE_VERIFIER}", src=str(build_zipapp()), dest=REMOTE_VERIFIER, mode="644")


def upload_verifier() -> None:
    """Plan the verifier's upload to the current host, unless an earlier stage of this run already did."""
    planned = memory_of(host.state).verifier_planned
    if host.name in planned:
        return
    planned.add(host.name)
    _upload()
