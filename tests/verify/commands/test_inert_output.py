"""What a root process of the verifier prints is inert: the apt hook's lines in apt's output, `verify check`'s lines,
the boot check's journal line. Each is made from a report built in memory (not read back through Report.from_json,
which makes text inert on the controller), and a report's text can be the venv owner's: here a file name in the venv's
torch/lib carries an ESC (erase the line, a green PASS) and an OSC 52 clipboard write, and the linkage check names it.

Run as a host runs them: this machine's bare /usr/bin/python3 with `-I -S` on this checkout's verifier installed as
on a host, against a stand-in workstation image (tests/support/drift_images.py; gcc-built STAND-INS for the torch
ROCm wheel and ROCm, `--root`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.drift_images import Workstation
from tests.support.installed_verifier import SYSTEM_PYTHON3, install
from tests.support.standin_rocm import SITE

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the installed verifier is root's only"),
]

HOSTILE = "\x1b[2K\r\x1b[32mPASS\x1b[0m\x1b]52;c;cm0gLXJmIH4=\x07"  # erase the line, green PASS, clipboard write
SHOWN = "\\x1b[2K\\x0d\\x1b[32mPASS\\x1b[0m\\x1b]52;c;cm0gLXJmIH4=\\x07"  # as inert() writes it


@pytest.fixture(scope="module")
def verifier(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("inert") / "verifier")


@pytest.fixture
def workstation(tmp_path) -> Workstation:
    """The provisioned stand-in, its torch/lib/libamdhip64.so a link to a file whose name the venv's owner chose: the
    linkage check fails naming the file the link resolves to (torch's HIP is not its bundled copy)."""
    workstation = Workstation.provisioned(tmp_path / "ws")
    lib = workstation.path(f"{SITE}/torch/lib")
    (lib / "libamdhip64.so").rename(lib / f"libamdhip64.so{HOSTILE}")
    (lib / "libamdhip64.so").symlink_to(f"libamdhip64.so{HOSTILE}")
    return workstation


def run(verifier: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SYSTEM_PYTHON3, "-I", "-S", str(verifier / "launcher.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )


def question(workstation: Workstation) -> list[str]:
    return [
        "--venv",
        "/opt/rocm-fleet/venv",
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--root",
        str(workstation.root),
    ]


def assert_inert(output: str) -> None:
    assert SHOWN in output, output  # the name is there, escaped
    assert not any(c in output for c in "\x1b\x07\r\x9b"), output


def test_the_apt_hooks_lines_are_inert(verifier, workstation, tmp_path):
    done = run(verifier, "apt-hook", *question(workstation), "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(
        "rocm-fleet apt hook: baseline recorded for /opt/rocm-fleet/venv: FAIL — linkage.static: torch's "
        f"libamdhip64.so resolves to {SITE}/torch/lib/libamdhip64.so{SHOWN} (via RPATH"
    )
    assert_inert(done.stdout)


def test_verify_checks_lines_are_inert_and_its_json_escapes_the_name(verifier, workstation):
    done = run(verifier, "check", *question(workstation), "--static-only")
    assert done.returncode == 1, done.stderr
    assert f"  FAIL  linkage.static: torch's libamdhip64.so resolves to {SITE}/torch/lib/libamdhip64.so{SHOWN}" in (
        done.stdout
    )
    assert_inert(done.stdout)
    as_json = run(verifier, "check", *question(workstation), "--static-only", "--json")
    assert "\\u001b[2K" in as_json.stdout and "\x1b" not in as_json.stdout  # JSON's own escape, read back exactly


def test_the_boot_checks_journal_line_is_inert(verifier, workstation, tmp_path):
    done = run(verifier, "boot-check", *question(workstation), "--static-only", "--state-dir", str(tmp_path / "b"))
    assert done.returncode == 1, done.stderr  # the check failed (exit 1), its journal line says so
    [line] = done.stdout.splitlines()
    assert line.startswith("rocm-fleet boot check: ") and ": FAIL — linkage.static: torch's libamdhip64.so" in line
    assert_inert(done.stdout)
