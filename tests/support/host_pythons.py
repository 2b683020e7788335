"""The python3 a workstation may have besides Debian 12's 3.11 (this machine's /usr/bin/python3): Ubuntu 22.04's 3.10,
Ubuntu 24.04's 3.12, and 3.13 — CPython builds this machine kind carries under pyenv. Root runs the host's python3
for the verifier, the apt hook, the boot check and the facts' programs, so each must work under all of them.

    python = interpreter("3.10")       # /root/.pyenv/versions/3.10.13/bin/python3, or the test is skipped, named
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

DEBIAN_PYTHON3 = "/usr/bin/python3"
OTHER_PYTHONS = {"3.10": "Ubuntu 22.04", "3.12": "Ubuntu 24.04", "3.13": "the next"}
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def interpreter(version: str) -> str:
    """The newest pyenv build of CPython `version` (3.X), or a skip that names it."""
    found = sorted(
        (
            path
            for path in PYENV.glob(f"{version}.*/bin/python3")
            if re.fullmatch(rf"{re.escape(version)}\.\d+", path.parents[1].name)
        ),
        key=lambda path: int(path.parents[1].name.rsplit(".", 1)[1]),
    )
    if not found:
        pytest.skip(f"no CPython {version} ({OTHER_PYTHONS[version]}'s python3) under {PYENV}")
    return str(found[-1])


def path_with(python: str) -> str:
    """A PATH whose `python3` is `python` (as the facts' shell finds it), the system's tools after it."""
    path = f"{Path(python).parent}:/usr/sbin:/usr/bin:/sbin:/bin"
    assert shutil.which("python3", path=path) == python
    return path
