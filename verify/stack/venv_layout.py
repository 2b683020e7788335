"""Where things are in a venv, read from files only (nothing imported, nothing executed).

`find_venv` checks that a path is a usable venv; `dist_version` reads an installed distribution's version from its
`.dist-info/METADATA` (what pip recorded, including local labels like `+rocm7.2`); `torch_version_module` reads the
assignments in `torch/version.py` with `ast` — importing it would import torch.

The venv belongs to an ordinary account while the verifier runs as root (on a host, and in the apt hook): every file
of it is hostile input, read as data through verify/safe_read.py (regular files only, never blocking, bounded), and a
symlink in place of METADATA or version.py is not followed (pip writes neither as a link).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from verify.ld.fsview import FileSystemView
from verify.safe_read import read_text

MAX_METADATA = 16 << 20  # torch's METADATA is about 40 KiB
MAX_SOURCE = 4 << 20  # torch/version.py is under 1 KiB


class VenvError(ValueError):
    """The --venv argument does not name a usable venv (bad input, exit code 2)."""


@dataclass(frozen=True)
class Venv:
    root: Path  # as given (a host path; may be a symlink)
    python: Path  # root/bin/python
    site_packages: Path


def find_venv(venv: Path, view: FileSystemView | None = None) -> Venv:
    """The venv at `venv` (a host path), looked up through `view` (this machine's files when None). The venv's
    paths are local paths (where its files open here): `view.image_path` gives the host's names back."""
    base = view.local(venv) if view is not None else Path(venv)
    if not (base / "pyvenv.cfg").is_file():
        raise VenvError(f"{venv}: not a venv (no pyvenv.cfg) — pass the venv's directory, e.g. /opt/rocm-fleet/venv")
    python = base / "bin" / "python"
    if not python.exists():
        raise VenvError(f"{venv}: no bin/python in this venv — recreate it (python3 -m venv {venv})")
    found = sorted((base / "lib").glob("python3*/site-packages"))
    if len(found) != 1:
        raise VenvError(f"{venv}: expected one lib/python3*/site-packages, found {len(found)} — recreate the venv")
    return Venv(root=venv, python=python, site_packages=found[0])


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_version(site_packages: Path, name: str) -> str | None:
    """The version pip recorded for distribution `name`, or None when it is not installed."""
    wanted = _normalize(name)
    for info in sorted(site_packages.glob("*.dist-info")):
        dist = info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        if _normalize(dist) != wanted:
            continue
        try:
            metadata = read_text(info / "METADATA", MAX_METADATA, errors="replace", follow=False)
        except OSError:
            continue
        for line in metadata.splitlines():
            if not line.strip():
                break  # end of the headers
            if line.lower().startswith("version:"):
                return line.split(":", 1)[1].strip()
    return None


def torch_version_module(site_packages: Path) -> dict[str, str | None]:
    """The string constants of torch/version.py (`__version__`, `hip`, `cuda`, `rocm`, …); {} when absent."""
    path = site_packages / "torch" / "version.py"
    try:
        tree = ast.parse(read_text(path, MAX_SOURCE, follow=False), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return {}
    values: dict[str, str | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, str)):
            for target in targets:
                if isinstance(target, ast.Name):
                    values[target.id] = value.value
    return values
