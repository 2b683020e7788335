"""roles/strays/facts.py: the command run on the host and the parsing of what it prints (pyinfra-style: command
and output in, fact out). The output is the real verifier's, run on real status data."""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
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
        f"elif ! echo '{verifier.verifier_sha256()}  /var/lib/rocm-fleet/verify.pyz' | sha256sum --check --status "
        "2>/dev/null; then echo '\"stale\"'; "
        "elif ! command -v python3 >/dev/null; then echo 'strays: python3 is not installed on this host, and the "
        "verifier needs it — apt-get install python3' >&2; exit 2; "
        f"else {verifier.verifier_command('strays', '--json')} || [ $? -eq 1 ]; fi"
    )


def test_a_verifier_that_is_not_this_checkouts_is_never_run(tmp_path):
    """Issue 9, High 2: at plan time the fact ran whatever file was at /var/lib/rocm-fleet/verify.pyz, as root — a
    stale one, or one another account swapped in during an upload. Now it says STALE and runs nothing. (The fact's
    shell text, run for real, with the host path replaced by a file here.)"""
    marker = tmp_path / "ran-as-root"
    swapped = io.BytesIO()
    with zipfile.ZipFile(swapped, "w") as archive:
        archive.writestr("__main__.py", f"open({str(marker)!r}, 'w').close()\nprint('null')\n")
    here = tmp_path / "verify.pyz"
    here.write_bytes(swapped.getvalue())
    command = DistroRocmStrays().command().replace(verifier.REMOTE_VERIFIER, str(here))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, '"stale"\n', "")
    assert DistroRocmStrays().process(done.stdout.splitlines()) == "stale"  # roles.strays.facts.STALE
    assert not marker.exists()


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
    archive = tmp_path / "verify.pyz"
    archive.write_bytes(verifier.verifier_archive())
    done = subprocess.run(
        ["/usr/bin/python3", "-I", str(archive), "strays", "--json", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr  # strays found: data, which the fact's `|| [ $? -eq 1 ]` keeps
    assert DistroRocmStrays().process(done.stdout.splitlines()) == find_strays(tmp_path)


@pytest.mark.parametrize("output", [["{"], ['{"schema": "verify.strays/0", "strays": []}'], ["[]"]])
def test_unusable_output_is_a_fact_error(output):
    with pytest.raises(FactProcessError, match="not usable"):
        DistroRocmStrays().process(output)
