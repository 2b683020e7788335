"""roles/uploads.py's checked_files for real: pyinfra over SSH with sudo into a local fleet host (localfleet), where a
`sha256sum` first on the host's PATH notes every file it hashes and runs the real one — so a test sees which run read
which file, not only what the run reported."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from localfleet import Fleet
from tests.support.chroot_hosts import finished
from tests.support.fleet_deploy import ENV, REPO, deploy_argv

pytestmark = [pytest.mark.slow, pytest.mark.root]

DEST = "/var/cache/rocm-fleet-test-uploads"
WHEEL = "big-1.0-py3-none-any.whl"
# A deploy file: the operation as the venv stage calls it for the wheelhouse, for the files in $UPLOADS_FROM.
DEPLOY = f"""\
import hashlib, os
from pathlib import Path
from roles.uploads import Upload, checked_files
local = Path(os.environ["UPLOADS_FROM"])
checked_files(name="Test uploads", directory={DEST!r}, delete=True,
              uploads=[Upload(path.name, hashlib.sha256(path.read_bytes()).hexdigest(), str(path))
                       for path in sorted(local.iterdir())])
"""
CALLS = "/var/log/sha256sum-calls"
# Notes the file names it is given (not --check, which reads its file list from stdin) and runs the real one.
SHA256SUM = f"""#!/bin/sh
printf '%s\\n' "$*" >> {CALLS}
exec /usr/bin/sha256sum "$@"
"""


def test_a_file_whose_ctime_changed_is_hashed_once_then_recorded_and_not_hashed_again(tmp_path):
    """Issue 12: after a chmod to the same mode or a hard link (the fleet benchmark's `cp -al`), every no-op run hashed
    the whole wheelhouse again: the file was hashed, found equal, and its record line was never rewritten. Now the
    run that hashes it records it again (one change, said on the host's line), `--dry` writes nothing, and the next
    run reads nothing."""
    local = tmp_path / "wheels"
    local.mkdir()
    (local / WHEEL).write_bytes(os.urandom(1 << 20))
    (local / "small-1.0-py3-none-any.whl").write_bytes(b"small")
    deploy_file = tmp_path / "uploads_deploy.py"
    deploy_file.write_text(DEPLOY)

    with Fleet.up(n=1, login="admin") as fleet:
        host = fleet.hosts[0]
        wrapper = host.root / "usr/local/bin/sha256sum"
        wrapper.write_text(SHA256SUM)
        wrapper.chmod(0o755)
        calls = host.root / CALLS.lstrip("/")
        record = host.root / DEST.lstrip("/") / ".rocm-fleet-sha256"

        def run(dry: bool = False):
            calls.write_text("")
            done = subprocess.run(
                deploy_argv(fleet.inventory, str(deploy_file), dry=dry),
                capture_output=True,
                text=True,
                cwd=REPO,
                env={**ENV, "UPLOADS_FROM": str(local)},
            )
            result = finished(done)
            assert result.returncode == 0, result.explain()
            if dry:  # what pyinfra's --json "plan" says would change ws1
                changes = [op["name"] for op in json.loads(done.stdout)["plan"] if "ws1" in op["hosts_with_change"]]
            else:
                changes = result.changed_operations
            return result, changes, calls.read_text().splitlines()

        first, changed, _ = run()
        assert changed == ["Test uploads"], first.explain()
        assert (host.root / DEST.lstrip("/") / WHEEL).read_bytes() == (local / WHEEL).read_bytes()
        quiet, changed, hashed = run()
        assert changed == [] and hashed == [], quiet.explain()

        for change in (["chmod", "644", f"{DEST}/{WHEEL}"], ["ln", f"{DEST}/{WHEEL}", "/root/a-hard-link"]):
            host.run(change)  # the ctime changes, the bytes do not
            before = record.read_bytes()
            plan, changed, hashed = run(dry=True)
            assert hashed == [f"-- {WHEEL}"] and changed == ["Test uploads"], plan.explain()
            assert record.read_bytes() == before  # --dry only read

            again, changed, hashed = run()
            assert hashed == [f"-- {WHEEL}"], again.explain()  # read once, as it must be: its stat changed
            assert changed == ["Test uploads"], again.explain()
            assert "hashed (their stat was not the recorded one) and found with the controller's sha256" in again.log

            after, changed, hashed = run()
            assert hashed == [], after.explain()  # the old code hashed it here, and on every later run
            assert changed == [], after.explain()

        # A real change is still found: the file is hashed, differs, and is uploaded again.
        host.run(["sh", "-c", f"printf x >> {DEST}/{WHEEL}"])
        repaired, changed, hashed = run()
        assert f"-- {WHEEL}" in hashed and changed == ["Test uploads"], repaired.explain()
        assert (
            hashlib.sha256((host.root / DEST.lstrip("/") / WHEEL).read_bytes()).digest()
            == hashlib.sha256((local / WHEEL).read_bytes()).digest()
        )
        assert Path(host.root / DEST.lstrip("/")).stat().st_uid == 0 and record.stat().st_uid == 0
