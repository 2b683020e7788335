"""roles/verifier.py: the verifier archive runs with a bare system python3 (no pyelftools installed there), is
reproducible (an unchanged checkout never re-uploads it), never comes from a file another account could plant on the
controller, and is never run on a host unless its sha256 is the one built here."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import zipfile

import pytest

from roles import verifier

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's own interpreter: no pyelftools, no project installed


def test_archive_runs_with_bare_system_python(tmp_path):
    probe = subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import elftools"], capture_output=True, text=True)
    assert probe.returncode != 0, "the system python must lack pyelftools, or this test proves nothing"
    archive = tmp_path / "verify.pyz"
    archive.write_bytes(verifier.verifier_archive())
    # -I: ignore the environment and the current directory, as on a host with nothing but python3.
    done = subprocess.run([SYSTEM_PYTHON, "-I", str(archive), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "strays" in done.stdout
    imported = subprocess.run(
        [
            SYSTEM_PYTHON,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import elftools.elf.elffile",
            str(archive),
        ],
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr


def test_archive_is_reproducible_and_complete():
    first, second = verifier.zipapp_bytes(), verifier.zipapp_bytes()
    assert first == second == verifier.verifier_archive()
    assert verifier.verifier_sha256() == hashlib.sha256(first).hexdigest()
    with zipfile.ZipFile(io.BytesIO(first)) as opened:
        names = set(opened.namelist())
    assert {"__main__.py", "verify/cli.py", "verify/debian/strays.py", "elftools/elf/elffile.py"} <= names
    assert {
        "verify/report/report_schema.json",
        "verify/checks/runtime_probe.py",
        "verify/stack/releases/7.2.4.json",
        "verify/commands/apt_hook.py",
    } <= names  # data files and the apt hook's entry, in their packages
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_the_archives_data_files_are_read_from_inside_it(tmp_path):
    """The report schema, the runtime probe's source and the release files are package data read with
    importlib.resources: from the archive, with the system's bare python3, they come out of the zip itself."""
    archive = tmp_path / "verify.pyz"
    archive.write_bytes(verifier.zipapp_bytes())
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from verify.report.report import load_schema\n"
        "from verify.checks.runtime import probe_source\n"
        "from verify.stack.rocm_release import known_releases, rocm_release\n"
        "import verify.report.report as r\n"
        "assert r.__file__.startswith(sys.argv[1]), r.__file__\n"
        "print(load_schema()['title'], '|', probe_source().splitlines()[0], '|', known_releases(), "
        "rocm_release('7.2.4').build)"
    )
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-c", code, str(archive)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('rocm-fleet verification report | """') and "('7.2.4',) 70204" in done.stdout


@pytest.mark.slow
@pytest.mark.root
def test_a_verifier_planted_in_the_controllers_temporary_directory_is_not_uploaded(tmp_path, monkeypatch):
    """For real: pyinfra uploads the verifier to a Debian 12 root (@chroot) while another account
    has planted TMPDIR/rocm-fleet-<uid>/verify-<sha16>.pyz — the name the archive was cached under, which anyone can
    compute (the build is reproducible). The host gets the bytes built from this checkout, and nothing is read from
    or written to the shared temporary directory."""
    from tests.support.chroot_hosts import chroot_host, run_pyinfra
    from tests.support.debian_roots import image

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))  # the pyinfra process's tempfile.gettempdir()
    built = verifier.zipapp_bytes()
    planted = shared / f"rocm-fleet-{os.getuid()}" / f"verify-{hashlib.sha256(built).hexdigest()[:16]}.pyz"
    planted.parent.mkdir(mode=0o700)
    planted.write_bytes(b"#!/usr/bin/env python3\nprint('planted by another account')\n")
    with chroot_host(image("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0")), tmp_path / "host") as root:
        run = run_pyinfra(root, "tasks/strays.py", {})
        uploaded = (root / "var/lib/rocm-fleet/verify.pyz").read_bytes()
    assert run.returncode == 0, run.explain()
    assert uploaded == verifier.zipapp_bytes()  # (built again: verify/ may change while a shared tree is tested)
    assert sorted(str(path.relative_to(shared)) for path in shared.rglob("*")) == [
        planted.parent.name,
        str(planted.relative_to(shared)),
    ]


def test_verifier_command_runs_only_the_expected_bytes(tmp_path):
    command = verifier.verifier_command("strays", "--root", "/srv/a b")
    assert command.endswith(
        f"python3 -I -S {verifier.REMOTE_VERIFIER} strays --root '/srv/a b'; else echo "
        f"'{verifier.stale_line()}' >&2; (exit 3); fi"
    )
    here = tmp_path / "verify.pyz"
    local = command.replace(verifier.REMOTE_VERIFIER, str(here))
    marker = tmp_path / "ran"
    # A zipapp that leaves a mark when it runs: another checkout's verifier, or one swapped on the host.
    stale = io.BytesIO()
    with zipfile.ZipFile(stale, "w") as archive:
        archive.writestr("__main__.py", f"open({str(marker)!r}, 'w').close()\n")
    for data in (stale.getvalue(), verifier.verifier_archive()[:-1]):
        here.write_bytes(data)
        done = subprocess.run(["sh", "-c", local], capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (verifier.STALE_EXIT, "")
        assert done.stderr.splitlines() == [verifier.stale_line().replace(verifier.REMOTE_VERIFIER, str(here))]
        assert not marker.exists()
    here.write_bytes(verifier.verifier_archive())
    done = subprocess.run(
        ["sh", "-c", local.replace("strays --root '/srv/a b'", "--help")], capture_output=True, text=True
    )
    assert done.returncode == 0 and "strays" in done.stdout, done.stderr
