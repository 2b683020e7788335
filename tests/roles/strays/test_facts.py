"""roles/strays/facts.py: the command run on the host and the parsing of what it prints (pyinfra-style: command
and output in, fact out). The output is the real verifier's, run on real status data."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from roles import verifier
from roles.strays.facts import DistroRocmStrays
from tests.support.installed_verifier import install, version
from verify.debian.strays import find_strays

DATA = Path(__file__).parents[2] / "verify" / "debian" / "data" / "strays"


def test_a_verifier_that_is_not_this_checkouts_is_never_run(tmp_path):
    """Issue 9, High 2: at plan time the fact ran whatever was at the verifier's path, as root. Now it runs only this
    checkout's launcher, and its version only after the launcher's rule: anything else is null (decided again after
    this run's install), and nothing of it runs. (The fact's shell text, run for real, the host path replaced.)"""
    top = tmp_path / "verifier"
    command = DistroRocmStrays().command().replace(verifier.TOP, str(top))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)  # nothing installed
    assert (done.returncode, done.stdout) == (0, "null\n")
    assert DistroRocmStrays().process(done.stdout.splitlines()) is None
    marker = tmp_path / "ran-as-root"
    top.mkdir()
    (top / "launcher.py").write_text(f"open({str(marker)!r}, 'w').close()\nprint('null')\n")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "null\n") and not marker.exists()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the verifier is root's only")
def test_the_fact_reads_the_installed_verifiers_strays_and_a_damaged_version_is_null(tmp_path):
    """The installed verifier (tests/support/installed_verifier.py) run through the fact's own command, on real
    Debian 13 status data: strays found (exit 1) is data; a changed module makes the launcher refuse: null."""
    (tmp_path / "image/var/lib/dpkg").mkdir(parents=True)
    shutil.copy(DATA / "trixie.status", tmp_path / "image/var/lib/dpkg/status")
    top = install(tmp_path / "verifier")
    command = DistroRocmStrays().command().replace(verifier.TOP, str(top))
    command = command.replace(" strays --json", f" strays --json --root {tmp_path / 'image'}")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert DistroRocmStrays().process(done.stdout.splitlines()) == find_strays(tmp_path / "image")
    (top / version() / "verify" / "commands" / "strays.py").write_text("print('null')\n")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "null\n")
    assert "is not the file its MANIFEST lists" in done.stderr


@pytest.mark.parametrize("output", [["{"], ['{"schema": "verify.strays/0", "strays": []}'], ["[]"]])
def test_unusable_output_is_a_fact_error(output):
    with pytest.raises(FactProcessError, match="not usable"):
        DistroRocmStrays().process(output)
