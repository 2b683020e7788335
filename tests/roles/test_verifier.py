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
    assert {"verify/report/report_schema.json", "verify/checks/runtime_probe.py", "verify/stack/releases/7.2.4.json",
            "verify/commands/apt_hook.py"} <= names  # data files and the apt hook's entry, in their packages
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_the_archives_data_files_are_read_from_inside_it(tmp_path):
    """The report schema, the runtime probe's source and the release files are package data read with
    importlib.resources: from the archive, with the system's bare python3, they come out of the zip itself."""
    archive = tmp_path / "verify.pyz"
    archive.write_bytes(verifier.zipapp_bytes())
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from verify.report.report import load_schema\n"
            "from verify.checks.runtime import probe_source\n"
            "from verify.stack.rocm_release import known_releases, rocm_release\n"
            "import verify.report.report as r\n"
            "assert r.__file__.startswith(sys.argv[1]), r.__file__\n"
            "print(load_schema()['title'], '|', probe_source().splitlines()[0], '|', known_releases(), "
            "rocm_release('7.2.4').build)")
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-c", code, str(archive)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rocm-fleet verification report | \"\"\"") and "('7.2.4',) 70204" in done.stdout


def test_verifier_command_quotes_arguments():
    assert verifier.verifier_command("strays", "--root", "/srv/a b") == (
        "python3 /var/lib/rocm-fleet/verify.pyz strays --root '/srv/a b'"
    )
