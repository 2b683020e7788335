"""verify/report/kept_files.py: reading what a host keeps as hostile input, and replacing a kept file in one step.

Real files in a scratch root: regular files, a symlink, a FIFO, a directory, a file too large, read by `verify kept`
(the status task's question; through the installed verifier on a host: tests/roles/status/test_facts.py).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verify.report.kept_files import KEPT, read_kept_files, replace_file

REPO = Path(__file__).resolve().parents[3]


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "rocm-fleet"
    (root / "apt-hook").mkdir(parents=True)
    (root / "boot-check").mkdir()
    return root


def test_each_kept_file_is_read_or_said_missing(tmp_path):
    root = _root(tmp_path)
    (root / "last-verify.json").write_text('{"kind": "x"}')
    answer = read_kept_files(str(root))
    assert set(answer["files"]) == set(KEPT) == {"verification", "apt_hook", "boot_check"}
    verification = answer["files"]["verification"]
    assert verification == {"path": f"{root}/last-verify.json", "text": '{"kind": "x"}'}
    assert answer["files"]["apt_hook"] == {"path": f"{root}/apt-hook/last.json", "missing": True}
    assert abs(answer["now"] - time.time()) < 60 and answer["hostname"] == socket.gethostname()
    # No state directory at all: everything missing, nothing raised.
    assert all(e.get("missing") for e in read_kept_files(str(tmp_path / "none"))["files"].values())


def test_a_symlink_a_fifo_a_directory_and_a_huge_file_are_reported_never_followed_or_opened(tmp_path):
    root = _root(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("root's secret")
    (root / "last-verify.json").symlink_to(secret)
    os.mkfifo(root / "apt-hook" / "last.json")  # opened for reading, it would block for ever
    (root / "boot-check" / "last.json").mkdir()
    with open(root / "last.json", "wb") as big:  # not a kept file: read_kept_files' limit is tried below
        big.truncate(101)
    # In a child with a time limit: a reader that opened the FIFO would hang, and the test would fail, not hang.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "kept",
            "--state-root",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    files = json.loads(done.stdout)["files"]
    assert files["verification"]["error"] == (
        f"{root}/last-verify.json: a symbolic link (not followed here), not a regular file"
    )
    assert files["apt_hook"]["error"] == (
        f"{root}/apt-hook/last.json: a FIFO (a named pipe: opening it would block), not a regular file"
    )
    assert files["boot_check"]["error"] == f"{root}/boot-check/last.json: a directory, not a regular file"
    assert "secret" not in done.stdout
    (root / "last-verify.json").unlink()
    (root / "last-verify.json").write_bytes(b"x" * 101)
    too_large = read_kept_files(str(root), limit=100)["files"]["verification"]["error"]
    assert too_large == f"{root}/last-verify.json: 101 bytes, more than the 100 bytes any real one has"


def test_replace_file_writes_whole_files_readable_by_others_and_leaves_nothing_behind(tmp_path):
    path = replace_file(str(tmp_path), "rocm_fleet.prom", "a 1\n")
    assert Path(path).read_text() == "a 1\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    replace_file(str(tmp_path), "rocm_fleet.prom", "a 2\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rocm_fleet.prom"]
    # A failure on the way (here: the name is a directory) removes the private file it was writing.
    (tmp_path / "blocked").mkdir()
    with pytest.raises(OSError):
        replace_file(str(tmp_path), "blocked", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked", "rocm_fleet.prom"]


def test_replace_file_never_writes_through_a_symlink(tmp_path):
    """An account that can write in the directory (Debian's /var/lib/prometheus belongs to `prometheus`) cannot send
    root's write elsewhere: a symlink at the name is replaced, and a directory that is a symlink is refused."""
    elsewhere = tmp_path / "etc-file"
    elsewhere.write_text("untouched")
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "rocm_fleet.prom").symlink_to(elsewhere)
    replace_file(str(metrics), "rocm_fleet.prom", "a 1\n")
    assert elsewhere.read_text() == "untouched" and not (metrics / "rocm_fleet.prom").is_symlink()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere-dir", target_is_directory=True)
    (tmp_path / "elsewhere-dir").mkdir()
    with pytest.raises(OSError):
        replace_file(str(tmp_path / "linked"), "rocm_fleet.prom", "a 1\n")
    assert list((tmp_path / "elsewhere-dir").iterdir()) == []
