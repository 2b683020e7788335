"""Facts of the venv stage: the host's python3 (what the wheels must fit) and what an existing venv holds (who can
write the directories leading to it is roles/debian/facts.py's VenvPathAccess, which preflight reads too).

None of them runs anything of the venv: it belongs to `venv_owner`, an ordinary account, and facts run as root. The
venv is read as data by the host's own python3 (`python3 -I -S`: root's interpreter, no PYTHON* variables, no site
directories, not the current directory on sys.path) — its pyvenv.cfg, the METADATA of each .dist-info — with
bounded reads of regular files only (a FIFO planted as METADATA must not hang root's plan); the owner of each entry
is read by the host's own find, which looks at each entry (lstat) and opens no file.
"""

from __future__ import annotations

import json
import shlex

from packaging.utils import canonicalize_name
from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.venv.model import HostPython, VenvState

# The host's python3 without starting it (an interpreter's start-up is ~15 ms of the host's CPU on every run): its
# version as it prints it (PY_VERSION, what platform.python_version() returns), glibc's as confstr gives it to Python
# (getconf asks the same confstr; it fails on a libc that is not glibc), and the machine as os.uname() has it.
_HOST_PYTHON = (
    "if command -v python3 >/dev/null; then python3 --version 2>&1; "
    'getconf GNU_LIBC_VERSION 2>/dev/null || echo "libc unknown"; uname -m; else echo null; fi'
)

# verify/safe_read.py's `read_text(path, LIMIT, errors="replace", follow=False)`, the one way verify/ reads a file
# of the venv, copied as text: the fact below runs alone on the host (`python3 -I -S -c`), where verify/ is not
# importable (the verifier may not be uploaded yet; this runs while planning). Keep the two the same —
# tests/roles/venv/test_facts.py holds this copy to safe_read on every kind of hostile file. LIMIT is
# verify/stack/venv_layout.MAX_METADATA.
_READ_TEXT = r"""
import os, stat
LIMIT = 16 << 20
def text(path):
    handle = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)  # opens nothing: no FIFO wait, no driver
    try:
        checked = os.fstat(handle)
        if not stat.S_ISREG(checked.st_mode):
            raise OSError("%s: not a regular file" % path)
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
        try:
            fd = os.open("/proc/self/fd/%d" % handle, flags)  # the inode just checked
        except FileNotFoundError:
            fd = os.open(path, flags | os.O_NOFOLLOW)
    finally:
        os.close(handle)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise OSError("%s: replaced while it was being opened" % path)
        if opened.st_size > LIMIT:
            raise OSError("%s: %d bytes, more than %d" % (path, opened.st_size, LIMIT))
        chunks, size = [], 0
        while size <= LIMIT:
            chunk = os.read(fd, min(1 << 16, LIMIT + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > LIMIT:
            raise OSError("%s: more than %d bytes" % (path, LIMIT))
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)
"""

# Run by the host's python3 with argv [venv, owner, foreign] (foreign: what _FOREIGN found, or ""). Prints one JSON
# object (or null: no venv there).
_VENV_STATE = (
    _READ_TEXT
    + r"""
import json, pwd, sys
venv, owner, foreign = sys.argv[1], sys.argv[2], sys.argv[3]
def name_of(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
def headers(path):
    found = {}
    for line in text(path).splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.lower() in ("name", "version") and key.lower() not in found:
            found[key.lower()] = value.strip()
    return found
if not os.path.lexists(os.path.join(venv, "bin", "python")):
    print("null")
    sys.exit(0)
state = {"owner": name_of(os.stat(venv).st_uid), "python": None, "packages": {}, "foreign": None, "broken": None}
problems = []
if not os.path.exists(os.path.join(venv, "bin", "python")):
    problems.append("bin/python points to an interpreter that is gone")
try:
    config = dict(line.split("=", 1) for line in text(os.path.join(venv, "pyvenv.cfg")).splitlines() if "=" in line)
    config = {key.strip(): value.strip() for key, value in config.items()}
    state["python"] = config.get("version") or config.get("version_info")
except OSError as error:
    problems.append("no readable pyvenv.cfg")
if not state["python"]:
    problems.append("pyvenv.cfg names no Python version")
try:
    sites = [os.path.join(venv, "lib", d, "site-packages") for d in sorted(os.listdir(os.path.join(venv, "lib")))
             if d.startswith("python3") and os.path.isdir(os.path.join(venv, "lib", d, "site-packages"))]
except OSError:
    sites = []
if len(sites) != 1:
    problems.append("%d lib/python3*/site-packages" % len(sites))
for site in sites:
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info"):
            try:
                found = headers(os.path.join(site, entry, "METADATA"))
            except OSError:
                continue
            if found.get("name") and found.get("version"):
                state["packages"][found["name"]] = found["version"]
state["foreign"] = foreign or None
state["broken"] = "; ".join(problems) or None
print(json.dumps(state))
"""
)


# The first entry below the venv not owned by `owner` ("" when none, or no such account): ~25,000 entries with torch,
# each lstat'ed by find (-H: the top followed where it is a symlink, as the venv's own path is; nothing below it
# followed), in C — the same walk in the python3 above cost 30–40 ms more of the host's CPU on every run.
_FOREIGN = (
    "if uid=$(id -u -- {owner} 2>/dev/null); then "
    'foreign=$(find -H {venv} -mindepth 1 ! -uid "$uid" -print -quit 2>/dev/null); else foreign=; fi'
)


def _load(output, what: str):
    try:
        return json.loads("\n".join(output))
    except ValueError as error:
        raise FactProcessError(f"{what}: unreadable output ({error}): {' '.join(output)[:200]}") from error


class HostPython3(FactBase):
    """The host's python3 (version, glibc, machine), or None when there is no python3."""

    def command(self) -> str:
        return _HOST_PYTHON

    def process(self, output) -> HostPython | None:
        lines = [line.strip() for line in output]
        if lines == ["null"]:
            return None
        if len(lines) != 3 or not lines[0].startswith("Python ") or not lines[2]:
            raise FactProcessError(f"host python3: unreadable output: {' '.join(lines)[:200]}")
        version, (libc, _, libc_version) = lines[0].split(" ", 1)[1], lines[1].partition(" ")
        if libc != "glibc" or not libc_version:
            raise FactProcessError(f"host python3 {version}: not a glibc system (manylinux wheels need glibc)")
        return HostPython(version=version, glibc=libc_version, machine=lines[2])


class VenvContents(FactBase):
    """What the venv at `path` holds, read as data: a VenvState (its `broken` says why it cannot be used as it is,
    its `foreign` names a file not owned by `owner`); None when there is no venv."""

    def command(self, path: str, owner: str) -> str:
        python = shlex.quote(f"{path}/bin/python")
        foreign = _FOREIGN.format(owner=shlex.quote(owner), venv=shlex.quote(path))
        arguments = f'{shlex.quote(path)} {shlex.quote(owner)} "$foreign"'
        read = f"{foreign}; python3 -I -S -c {shlex.quote(_VENV_STATE)} {arguments}"
        no_python3 = json.dumps(
            {
                "owner": None,
                "python": None,
                "packages": {},
                "foreign": None,
                "broken": "the host has no python3 to read it with",
            }
        )
        return (
            f"if [ ! -e {python} ] && [ ! -L {python} ]; then echo null; "
            f"elif command -v python3 >/dev/null; then {read}; else echo {shlex.quote(no_python3)}; fi"
        )

    def process(self, output) -> VenvState | None:
        data = _load(output, "venv contents")
        if data is None:
            return None
        packages = {canonicalize_name(name): version for name, version in data["packages"].items()}
        return VenvState(
            python=data["python"] or "?",
            owner=data["owner"] or "?",
            packages=packages,
            foreign=data.get("foreign"),
            broken=data.get("broken"),
        )
