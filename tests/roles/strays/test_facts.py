"""roles/strays/facts.py: the command run on the host and the parsing of what it prints (pyinfra-style: command
and output in, fact out). The output is the real verifier's, run on real status data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from roles import verifier
from roles.strays.facts import DistroRocmStrays
from verify.debian.strays import find_strays

DATA = Path(__file__).parents[2] / "verify" / "debian" / "data" / "strays"


def test_command():
    assert DistroRocmStrays().command() == (
        "if [ ! -f /var/lib/rocm-fleet/verify.pyz ]; then echo null; "
        "elif ! command -v python3 >/dev/null; then echo 'strays: python3 is not installed on this host, and the "
        "verifier needs it — apt-get install python3' >&2; exit 2; "
        "else python3 /var/lib/rocm-fleet/verify.pyz strays --json || [ $? -eq 1 ]; fi"
    )


def test_command_before_the_upload_says_null():
    # Runs the fact's shell text for real; this machine has no /var/lib/rocm-fleet/verify.pyz.
    assert not Path(verifier.REMOTE_VERIFIER).exists()
    done = subprocess.run(["sh", "-c", DistroRocmStrays().command()], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "null\n")
    assert DistroRocmStrays().process(done.stdout.splitlines()) is None


def test_process_reads_the_real_verifier_output(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    shutil.copy(DATA / "trixie.status", tmp_path / "var/lib/dpkg/status")
    # The archive that would be uploaded, run with Debian's python3 — exactly what the host runs.
    done = subprocess.run(["/usr/bin/python3", "-I", str(verifier.build_zipapp()), "strays", "--json",
                           "--root", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr  # strays found: data, which the fact's `|| [ $? -eq 1 ]` keeps
    assert DistroRocmStrays().process(done.stdout.splitlines()) == find_strays(tmp_path)


@pytest.mark.parametrize("output", [["{"], ['{"schema": "verify.strays/0", "strays": []}'], ["[]"]])
def test_unusable_output_is_a_fact_error(output):
    with pytest.raises(FactProcessError, match="not usable"):
        DistroRocmStrays().process(output)
