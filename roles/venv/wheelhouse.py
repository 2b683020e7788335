"""The offline wheelhouse, on the controller: every wheel a host needs for its venv, downloaded with pip for the host's
Python version and platform (not the controller's), once.

    prepare_wheelhouse(Path("/srv/wheelhouse"), host_python, "torch==2.13.0+rocm7.2", torch_index_url,
    ["bitsandbytes==0.50.1"])
      -> /srv/wheelhouse/cp311-manylinux_2_36_x86_64/   (then synced to the hosts and installed with --no-index)

Two pip runs, because torch and the rest come from different indexes: torch (and its dependencies) from the torch
index alone, as PyTorch documents (`--index-url`); then the rest from pip's configured index, with torch pinned to the
exact file already downloaded, so pip cannot swap in another torch build from PyPI.

A set is complete when its stamp (written last) lists the requirements, the indexes and every file with its size and
sha256, and every file still has them (a wheel changed since it was downloaded is downloaded again, not uploaded);
then nothing is downloaded again. Checking that means hashing every wheel — gigabytes for the torch ROCm wheel, on
every run — so each file's sha256 is recorded in `.hashed.json` with its size, inode, mtime and ctime (nanoseconds),
and taken from there while all four are unchanged: any write or replacement changes the ctime, which cannot be set back,
so a changed file is always hashed again (as the host side does, roles/uploads.py). A file changed in the last
seconds is not recorded: timestamps advance in clock ticks, and a write within the tick of the record would keep them.
Anything else is rebuilt in a private directory (mkdtemp) and moved into place, so an interrupted download never leaves
a half set that looks complete. Several hosts (greenlets) and several controller processes may ask at once: one
downloads, the others wait and reuse.

The set carries `requirements.txt`: every wheel as `name==version --hash=sha256:…`, from the hashes computed here.
The host installs with `pip install --no-index --require-hashes -r requirements.txt`, so pip installs exactly these
bytes (and the upload, `roles/uploads.py`, checks each file's sha256 on the host before it is put in place).
What the hashes rest on: pip downloaded the wheels over TLS from the indexes and checked them against the hashes the
index states; from then on they are ours.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from pyinfra.api.exceptions import PyinfraError

from roles.venv.model import HostPython, wheel_platforms

log = logging.getLogger(__name__)

STAMP = ".complete.json"
HASHED = ".hashed.json"  # file name -> [size, inode, mtime_ns, ctime_ns, sha256] (see the module docstring)
_SETTLED_NS = 2_000_000_000  # a file whose ctime is younger than this is hashed each time, never recorded
REQUIREMENTS = "requirements.txt"  # = roles.venv.operations.REQUIREMENTS
_in_process = threading.Lock()  # greenlets of one run: pip runs block, so no switch happens while this is held
_verified: dict[Path, str] = {}  # directory -> the stamp text whose hashes this process checked


class WheelhouseError(PyinfraError):
    """The wheelhouse could not be prepared; one line naming the directory, what failed and what to do."""


def _pip_download(dest: Path, target: HostPython, requirements: list[str], extra: list[str]) -> None:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar",
        "off",
        "--dest",
        str(dest),
        "--only-binary=:all:",
        "--python-version",
        target.minor,
        "--implementation",
        "cp",
        "--abi",
        f"cp{target.minor.replace('.', '')}",
    ]
    for platform in wheel_platforms(target.glibc, target.machine):
        argv += ["--platform", platform]
    argv += extra + requirements
    log.info("wheelhouse: %s", " ".join(argv[3:]))
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip() and "is ignored" not in line]
        raise WheelhouseError(
            f"wheelhouse {dest.parent}: pip download {' '.join(requirements)} for Python {target.minor} "
            f"({target.machine}, glibc {target.glibc}) failed: {lines[-1] if lines else 'no output'} — check the "
            "index URLs and that these versions exist as wheels for that Python"
        )


def _wheel_version(dest: Path, name: str) -> str:
    wanted = canonicalize_name(name)
    for wheel in dest.glob("*.whl"):
        wheel_name, version, _build, _tags = parse_wheel_filename(wheel.name)
        if wheel_name == wanted:
            return str(version)
    raise WheelhouseError(f"wheelhouse {dest.parent}: pip reported success but left no {name} wheel in {dest}")


def _recipe(target: HostPython, torch_spec: str, torch_index_url: str, others: list[str]) -> dict:
    return {
        "python": target.minor,
        "glibc": target.glibc,
        "machine": target.machine,
        "torch": torch_spec,
        "torch_index_url": torch_index_url,
        "others": sorted(others),
    }


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as opened:
        for block in iter(lambda: opened.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stat_key(path: Path) -> list[int]:
    status = path.stat()
    return [status.st_size, status.st_ino, status.st_mtime_ns, status.st_ctime_ns]


def _hashed_record(directory: Path) -> dict:
    try:
        record = json.loads((directory / HASHED).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _sha256_recorded(directory: Path, name: str, record: dict, fresh: dict) -> str:
    """The file's sha256: from `record` while its size, inode, mtime and ctime are unchanged, else hashed now (and
    put in `fresh` unless it changed in the last seconds)."""
    path = directory / name
    key = _stat_key(path)
    entry = record.get(name)
    if isinstance(entry, list) and len(entry) == 5 and entry[:4] == key:
        fresh[name] = entry
        return entry[4]
    digest = sha256_of(path)
    if time.time_ns() - key[3] >= _SETTLED_NS and _stat_key(path) == key:
        fresh[name] = [*key, digest]
    return digest


def _write_hashed(directory: Path, fresh: dict) -> None:
    """Replace the record atomically; a directory we cannot write only costs a hash next time."""
    try:
        with tempfile.NamedTemporaryFile("w", dir=directory, prefix=f"{HASHED}.", delete=False) as partial:
            json.dump(fresh, partial, sort_keys=True)
        Path(partial.name).replace(directory / HASHED)
    except OSError:
        log.info("wheelhouse %s: could not record the hashes (they are computed again next run)", directory)


def requirements_text(files: dict[str, dict]) -> str:
    """requirements.txt for pip's hash-checking mode: one line per distribution, every wheel's sha256."""
    hashes: dict[tuple[str, str], list[str]] = {}
    for name, entry in sorted(files.items()):
        if name.endswith(".whl"):
            wheel_name, version, _build, _tags = parse_wheel_filename(name)
            hashes.setdefault((str(wheel_name), str(version)), []).append(entry["sha256"])
    lines = [
        f"{name}=={version} " + " ".join(f"--hash=sha256:{digest}" for digest in sorted(digests))
        for (name, version), digests in sorted(hashes.items())
    ]
    return "\n".join(lines) + "\n"


def _complete(directory: Path, recipe: dict) -> bool:
    try:
        text = (directory / STAMP).read_text()
        stamp = json.loads(text)
    except (OSError, ValueError):
        return False
    files = stamp.get("files") if isinstance(stamp, dict) else None
    if stamp.get("recipe") != recipe or not isinstance(files, dict):
        return False
    if not all(isinstance(entry, dict) and {"size", "sha256"} <= set(entry) for entry in files.values()):
        return False  # a stamp from before the hashes: download again
    for name, entry in files.items():
        if not (directory / name).is_file() or (directory / name).stat().st_size != entry["size"]:
            return False
    if _verified.get(directory) != text:
        record, fresh = _hashed_record(directory), {}
        if any(_sha256_recorded(directory, name, record, fresh) != entry["sha256"] for name, entry in files.items()):
            log.warning(
                "wheelhouse %s: a file no longer has the sha256 it was downloaded with: downloading again", directory
            )
            return False
        if fresh != record:
            _write_hashed(directory, fresh)
        _verified[directory] = text
    requirements = directory / REQUIREMENTS
    wanted = requirements_text(files)
    if not requirements.is_file() or requirements.read_text() != wanted:
        requirements.write_text(wanted)
    return True


def wheelhouse_files(directory: Path) -> dict[str, str]:
    """{file name: sha256} of a complete set, requirements.txt included: what the host gets."""
    files = json.loads((directory / STAMP).read_text())["files"]
    found = {name: entry["sha256"] for name, entry in files.items()}
    found[REQUIREMENTS] = hashlib.sha256(requirements_text(files).encode()).hexdigest()
    return found


def prepare_wheelhouse(
    base: Path, target: HostPython, torch_spec: str, torch_index_url: str, others: list[str]
) -> Path:
    """The directory under `base` holding every wheel for `target` (downloaded now unless already complete)."""
    directory = base / target.tag
    recipe = _recipe(target, torch_spec, torch_index_url, others)
    with _in_process:
        if _complete(directory, recipe):
            return directory
        base.mkdir(parents=True, exist_ok=True)
        with open(base / f".{target.tag}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _complete(directory, recipe):  # another controller process finished it meanwhile
                return directory
            # Private (mode 700) and unpredictable, also in a wheelhouse directory other accounts can write.
            partial = Path(tempfile.mkdtemp(prefix=f".partial-{target.tag}-", dir=base))
            try:
                torch_name = Requirement(torch_spec).name
                _pip_download(partial, target, [torch_spec], ["--index-url", torch_index_url])
                pin = partial / ".torch-pin.txt"
                pin.write_text(f"{torch_name}=={_wheel_version(partial, torch_name)}\n")
                # --find-links: the torch wheel just downloaded is a candidate, and the pin makes it the only one.
                _pip_download(partial, target, list(others), ["--find-links", str(partial), "--constraint", str(pin)])
                pin.unlink()
                files = {
                    wheel.name: {"size": wheel.stat().st_size, "sha256": sha256_of(wheel)}
                    for wheel in sorted(partial.glob("*.whl"))
                }
                (partial / REQUIREMENTS).write_text(requirements_text(files))
                (partial / STAMP).write_text(json.dumps({"recipe": recipe, "files": files}, indent=2) + "\n")
                partial.chmod(0o755)
                if directory.exists():
                    shutil.rmtree(directory)
                partial.rename(directory)
                _verified[directory] = (directory / STAMP).read_text()
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            log.info("wheelhouse %s: %d wheels for %s", directory, len(files), target.tag)
    return directory
