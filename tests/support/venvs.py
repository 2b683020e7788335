"""Real virtual environments for tests and benchmarks, built once and cached under .cache/venvs/.

Several test sessions (and helpers working in parallel) may ask for the same venv at once, so building holds a file
lock and a venv counts as ready only when its stamp (the exact requirement list) is written last.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from roles import pins

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "venvs"

# torch 2.13.0 CPU lies on this machine's disk (pip's find-links); bitsandbytes 0.50.1 is the real PyPI wheel.
TORCH_CPU = ("torch==2.13.0", "bitsandbytes==0.50.1")
# The model check's stack: the same torch and bitsandbytes, plus Transformers and accelerate at their pins. Built with
# the system python3 (Debian's 3.11), so that its probe can run as an unprivileged account, as it runs as venv_owner
# on a host: the test runner's own python may sit under root's 0700 home.
TORCH_CPU_TRANSFORMERS = (
    *TORCH_CPU,
    f"transformers=={pins.TRANSFORMERS_VERSION}",
    f"accelerate=={pins.ACCELERATE_VERSION}",
)
SYSTEM_PYTHON = "/usr/bin/python3"
# torch 2.14.1 is a CUDA build with nvidia-* wheels (about 5.5 GB): a large venv whose libraries find each other
# through RPATH, used by the linkage benchmark.
TORCH_CUDA = ("torch==2.14.1", "bitsandbytes==0.50.1")


def ensure_venv(name: str, requirements: tuple[str, ...], python: str = sys.executable) -> Path:
    """Return the path of a venv named `name` with exactly `requirements` installed, building it if needed."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / name
    stamp = venv / ".requirements"
    wanted = "\n".join(requirements) + "\n"
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == wanted:
            return venv
        subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
            check=True,
        )
        stamp.write_text(wanted)
    return venv


def transformers_venv() -> Path:
    """The real venv of the model check: torch 2.13.0 (CPU), bitsandbytes 0.50.1, Transformers and accelerate."""
    return ensure_venv("torch-cpu-transformers", TORCH_CPU_TRANSFORMERS, python=SYSTEM_PYTHON)


def planted_venv(venv: Path, standin: Path, environ: dict[str, str] | None = None) -> Path:
    """A venv at `venv` (made with the system python3, nothing installed) whose site-packages carry a .pth file that
    puts the transformers venv's packages on the path and, at start-up, sets `environ` and runs `standin` (a
    sitecustomize.py of tests/support/standins/): a fault planted as a venv's owner could plant it. What the model
    check's tests run as the venv's owner — PYTHONPATH would not reach that probe (it gets the owner's environment).
    Returns its python."""
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    hook = f"import os; os.environ.update({dict(environ or {})!r}); import runpy; runpy.run_path({str(standin)!r})"
    (site_packages(venv) / "planted.pth").write_text(f"{site_packages(transformers_venv())}\n{hook}\n")
    return venv / "bin" / "python"


def site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


def _only_root_writes(path: Path) -> bool:
    """Whether `path` and every directory above it are root's and writable by nobody else."""
    for directory in (path, *path.parents):
        status = directory.stat()
        if status.st_uid != 0 or status.st_mode & 0o022:
            return False
    return True


@contextlib.contextmanager
def root_only_dir():
    """A new directory (mode 755) whose parents only root can write, removed afterwards: for venvs another account
    owns (pytest's tmp_path lies under /tmp, which every account can write, and under a directory only root can enter).
    In the checkout's .cache — or, for a checkout under such a directory (a clone in /tmp), in /var/lib.
    """
    base = REPO / ".cache"
    base.mkdir(exist_ok=True)
    if not _only_root_writes(base):
        base = Path("/var/lib")
    made = Path(tempfile.mkdtemp(prefix="root-only-", dir=base))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)
