"""fleet.write_file, how the controller writes reports, the summary and the history: the old file or the new one, never
half of one, nothing left behind on a failure, and a reports_dir that is a link to a directory is written through."""

from __future__ import annotations

import os
import stat

import pytest

from roles.verification.fleet import write_file


def test_replaces_the_file_whole(tmp_path):
    target = tmp_path / "reports" / "summary.md"
    write_file(target, "old\n")
    before = os.stat(target).st_ino
    write_file(target, "new\n")
    assert target.read_text() == "new\n"
    assert os.stat(target).st_ino != before  # a new file renamed over the old one, not the old one rewritten
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.md"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_file(target, "new \udcff")  # a lone surrogate cannot be written as UTF-8
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_does_not_follow_a_planted_partial_name(tmp_path):
    """The partial name is mkstemp's (O_EXCL, random): a symlink planted at a predictable name is never written."""
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    for pid in (os.getpid(), os.getpid() + 1):
        (tmp_path / f".summary.md.{pid}.partial").symlink_to(victim)
    write_file(tmp_path / "summary.md", "new\n")
    assert victim.read_text() == "untouched\n"


def test_a_reports_dir_that_is_a_link_to_a_directory_is_written_through(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "reports").symlink_to(tmp_path / "elsewhere")
    write_file(tmp_path / "reports" / "summary.md", "new\n")
    assert (tmp_path / "elsewhere" / "summary.md").read_text() == "new\n"
