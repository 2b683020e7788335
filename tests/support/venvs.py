"""Real virtual environments for tests and benchmarks, built once and cached under .cache/venvs/.

Several test sessions (and helpers working in parallel) may ask for the same venv at once, so building holds a file
lock and a venv counts as ready only when its stamp (the exact requirement list) is written last.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "venvs"

# torch 2.13.0 CPU lies on this machine's disk (pip's find-links); bitsandbytes 0.50.1 is the real PyPI wheel.
TORCH_CPU = ("torch==2.13.0", "bitsandbytes==0.50.1")
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


def site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found
