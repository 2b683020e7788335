"""Facts of the venv stage: the host's python3 (what the wheels must fit) and what an existing venv holds.

Both run a few lines of Python on the host and print JSON; `process` turns it into the model's dataclasses.
"""

from __future__ import annotations

import json
import shlex

from packaging.utils import canonicalize_name
from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.venv.model import HostPython, VenvState

_HOST_PYTHON = (
    "import json, os, platform, sys; "
    "libc = (os.confstr('CS_GNU_LIBC_VERSION') or '').split(); "
    "print(json.dumps({'version': platform.python_version(), "
    "'glibc': libc[1] if len(libc) == 2 and libc[0] == 'glibc' else None, 'machine': platform.machine()}))"
)

# Runs with the venv's own interpreter: sys.prefix is the venv, importlib.metadata sees exactly its packages.
_VENV_STATE = (
    "import json, os, platform, pwd, sys; from importlib import metadata; "
    "uid = os.stat(sys.prefix).st_uid; "
    "owner = next((p.pw_name for p in pwd.getpwall() if p.pw_uid == uid), str(uid)); "
    "print(json.dumps({'python': platform.python_version(), 'owner': owner, "
    "'packages': {d.metadata['Name']: d.version for d in metadata.distributions() if d.metadata['Name']}}))"
)


def _load(output, what: str):
    try:
        return json.loads("\n".join(output))
    except ValueError as error:
        raise FactProcessError(f"{what}: unreadable output ({error}): {' '.join(output)[:200]}") from error


class HostPython3(FactBase):
    """The host's python3 (version, glibc, machine), or None when there is no python3."""

    def command(self) -> str:
        return f"if command -v python3 >/dev/null; then python3 -c {shlex.quote(_HOST_PYTHON)}; else echo null; fi"

    def process(self, output) -> HostPython | None:
        data = _load(output, "host python3")
        if data is None:
            return None
        if not data.get("glibc"):
            raise FactProcessError(f"host python3 {data.get('version')}: not a glibc system (manylinux wheels need glibc)")
        return HostPython(version=data["version"], glibc=data["glibc"], machine=data["machine"])


class VenvContents(FactBase):
    """What the venv at `path` holds: a VenvState; None when there is no venv; "broken" when its python does not run
    (e.g. the interpreter it was made from is gone)."""

    def command(self, path: str) -> str:
        python = shlex.quote(f"{path}/bin/python")
        return (f"if [ -e {python} ] || [ -L {python} ]; then "
                f"{python} -c {shlex.quote(_VENV_STATE)} 2>/dev/null || echo '\"broken\"'; else echo null; fi")

    def process(self, output) -> VenvState | str | None:
        data = _load(output, "venv contents")
        if data is None or data == "broken":
            return data
        packages = {canonicalize_name(name): version for name, version in data["packages"].items()}
        return VenvState(python=data["python"], owner=data["owner"], packages=packages)
