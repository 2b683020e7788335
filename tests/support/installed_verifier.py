"""This checkout's verifier installed in a scratch directory exactly as on a host: the controller's archive
(roles/verifier.py `bundle`), installed by the host's own install script (`install_script`: unpacked, compiled by the
given python3, sealed, held to the launcher's rule, put in place, `current` switched), then run through its launcher.

    top = install(tmp_path / "verifier")                     # top/launcher.py, top/<V>/, top/current
    done = launch(top, "--version", version(), "strays", "--json")

Root only: the launcher runs nothing that another account could change, and the install makes everything root's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from roles import verifier

SYSTEM_PYTHON3 = "/usr/bin/python3"


def version() -> str:
    return verifier.version()


def install(top: Path, python: str = SYSTEM_PYTHON3, token: str = "0" * 32) -> Path:
    """Install this checkout's verifier as it is now (a test may have added a release file) into `top` (made root's,
    0755, if need be) with `python` as the host's python3; returns `top`."""
    for cached in (verifier._sources, verifier.version, verifier.archive):
        cached.cache_clear()
    top.mkdir(mode=0o755, parents=True, exist_ok=True)
    top.chmod(0o755)
    partial = top / f".upload.{token}"
    partial.write_bytes(verifier.archive())
    done = run_install(top, partial, python, token)
    assert done.returncode == 0, done.stdout + done.stderr
    return top


def run_install(top: Path, partial: Path, python: str = SYSTEM_PYTHON3, token: str = "0" * 32):
    """The install script as root runs it on a host (its python3 first on PATH), without the host lock."""
    script = verifier.install_script(str(partial), token, top=str(top), legacy=())
    path = f"{Path(python).parent}:/usr/sbin:/usr/bin:/sbin:/bin"
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={"PATH": path}, timeout=300)


def launch(top: Path, *arguments: str, python: str = SYSTEM_PYTHON3, **options) -> subprocess.CompletedProcess:
    """`python3 -I -S TOP/launcher.py ARGUMENTS`, from /, as the callers on a host run it."""
    return subprocess.run(
        [python, "-I", "-S", str(top / "launcher.py"), *arguments],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=options.pop("timeout", 300),
        **options,
    )
