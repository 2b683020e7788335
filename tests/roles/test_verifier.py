"""roles/verifier.py: the verifier archive runs with a bare system python3 (no pyelftools installed there) and is
reproducible, so an unchanged checkout never re-uploads it."""

from __future__ import annotations

import subprocess
import zipfile

from roles import verifier

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's own interpreter: no pyelftools, no project installed


def test_archive_runs_with_bare_system_python(tmp_path):
    probe = subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import elftools"], capture_output=True, text=True)
    assert probe.returncode != 0, "the system python must lack pyelftools, or this test proves nothing"
    archive = verifier.build_zipapp()
    # -I: ignore the environment and the current directory, as on a host with nothing but python3.
    done = subprocess.run(
        [SYSTEM_PYTHON, "-I", str(archive), "--help"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "strays" in done.stdout
    imported = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import elftools.elf.elffile",
         str(archive)],
        capture_output=True, text=True,
    )
    assert imported.returncode == 0, imported.stderr


def test_archive_is_reproducible_and_complete():
    first, second = verifier.zipapp_bytes(), verifier.zipapp_bytes()
    assert first == second
    archive = verifier.build_zipapp()
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
    assert {"__main__.py", "verify/cli.py", "verify/debian/strays.py", "elftools/elf/elffile.py"} <= names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_verifier_command_quotes_arguments():
    assert verifier.verifier_command("strays", "--root", "/srv/a b") == (
        "python3 /var/lib/rocm-fleet/verify.pyz strays --root '/srv/a b'"
    )
