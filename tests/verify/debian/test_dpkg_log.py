"""verify/debian/dpkg_log.py: what dpkg changed lately, read from a log real dpkg wrote (a private root and database,
its own --log), and read as a host's file: bounded, never blocking."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time

import pytest

from tests.support.debs import build_deb
from verify.debian import dpkg_log
from verify.debian.dpkg_log import parse, recent_changes
from verify.report import kept


def _dpkg(tmp_path, *arguments: str) -> None:
    done = subprocess.run(
        ["dpkg", f"--root={tmp_path}/root", f"--admindir={tmp_path}/admin", f"--log={tmp_path}/dpkg.log", *arguments],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dpkg"), reason="needs root and dpkg")
def test_the_changes_real_dpkg_logged_each_with_its_time_and_versions(tmp_path):
    for directory in ("root", "admin/updates", "admin/info"):
        (tmp_path / directory).mkdir(parents=True)
    (tmp_path / "admin" / "status").write_text("")
    # A conffile, so that --remove leaves it and --purge has something left to purge (dpkg logs a purge then only).
    control, conf = {"Package": "rocm-fleet-test-log", "Architecture": "all"}, "/etc/rocm-fleet-test-log.conf"
    old = build_deb(tmp_path, {**control, "Version": "1.0"}, {conf: b"x\n"}, conffiles=(conf,))
    new = build_deb(tmp_path, {**control, "Version": "2.0"}, {conf: b"x\n"}, conffiles=(conf,))
    before = math.floor(time.time())
    _dpkg(tmp_path, "-i", str(old))
    _dpkg(tmp_path, "-i", str(new))
    _dpkg(tmp_path, "--remove", "rocm-fleet-test-log")
    _dpkg(tmp_path, "--purge", "rocm-fleet-test-log")
    after = time.time()

    found = recent_changes(str(tmp_path / "dpkg.log"), str(tmp_path / "admin" / "status"))

    assert found["complete"] is True and "error" not in found
    # dpkg's log also holds status, configure and startup lines: only what adds or takes away a version is kept.
    assert [change[1:] for change in found["changes"]] == [
        ["install", "rocm-fleet-test-log:all", None, "1.0"],
        ["upgrade", "rocm-fleet-test-log:all", "1.0", "2.0"],
        ["remove", "rocm-fleet-test-log:all", "2.0", None],
        ["purge", "rocm-fleet-test-log:all", "2.0", None],
    ]
    assert all(before <= change[0] <= after for change in found["changes"]), (before, found, after)
    assert before <= found["status_mtime"] <= after


def test_only_the_logs_tail_is_read_from_the_start_of_a_line(tmp_path):
    log = tmp_path / "dpkg.log"
    filler = "2026-12-01 10:00:00 status installed libfiller:amd64 1.0\n" * 1000
    log.write_text(
        "2026-11-01 09:00:00 install libold:amd64 <none> 1.0\n"
        + filler
        + "2026-12-05 02:00:01 install librocm-smi64-1:amd64 <none> 5.2.3-2\n"
    )
    found = recent_changes(str(log), str(tmp_path / "no-status"), tail=4096)
    assert found["complete"] is False and found["status_mtime"] is None
    assert [change[1:] for change in found["changes"]] == [["install", "librocm-smi64-1:amd64", None, "5.2.3-2"]]
    whole = recent_changes(str(log), str(tmp_path / "no-status"))
    assert whole["complete"] is True and [change[2] for change in whole["changes"]] == [
        "libold:amd64",
        "librocm-smi64-1:amd64",
    ]


def test_lines_that_are_not_changes_are_left_out():
    text = (
        "2026-12-05 02:00:01 startup packages install\n"
        "2026-12-05 02:00:01 configure libfoo:amd64 1.0 1.0\n"
        "2026-13-45 02:00:01 install libbad:amd64 <none> 1.0\n"  # no such date
        "2026-12-05 02:00:01 install libshort:amd64 <none>\n"
        "\x00\x1b[2K garbage\n"
        "2026-12-05 02:00:02 install libgood:amd64 <none> 1.0\n"
    )
    assert [change[2] for change in parse(text)] == ["libgood:amd64"]


def test_a_log_that_cannot_be_read_is_one_line_and_a_fifo_never_blocks(tmp_path):
    missing = recent_changes(str(tmp_path / "none.log"), str(tmp_path / "none"))
    assert missing == {"status_mtime": None, "error": f"{tmp_path}/none.log: No such file or directory"}
    fifo = tmp_path / "dpkg.log"
    os.mkfifo(fifo)
    answer = recent_changes(str(fifo), str(tmp_path / "none"))  # opened without blocking: no writer needed
    assert "changes" not in answer and answer["error"].startswith(f"{fifo}: "), answer


def test_the_controllers_reader_takes_what_the_hosts_reader_gives():
    """The controller never imports the host's dpkg reader (the status task loads none): the two agree."""
    assert (kept.DPKG_CHANGES, kept.DPKG_STATUS) == (dpkg_log.CHANGES, dpkg_log.STATUS)
