"""verify/system/textfiles.py: a host's configuration files as hostile input — regular files only (a FIFO is never
opened, so nothing blocks), bounded reads, one line naming the file for each refusal."""

from __future__ import annotations

import os

import pytest

from verify.system.textfiles import FileTooLarge, NotRegularFile, read_optional, read_text


def test_regular_file_reads_and_a_missing_one_is_none(tmp_path):
    (tmp_path / "environment").write_text("LD_LIBRARY_PATH=/opt/rocm/lib\n")
    assert read_text(tmp_path / "environment") == "LD_LIBRARY_PATH=/opt/rocm/lib\n"
    assert read_optional(tmp_path / "absent") == (None, None)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "environment")  # opened for reading, a FIFO without a writer would block for ever
    with pytest.raises(NotRegularFile, match="is a FIFO, not a regular file"):
        read_text(tmp_path / "environment")
    assert read_optional(tmp_path / "environment")[1].endswith("environment is a FIFO, not a regular file")


def test_a_directory_and_a_device_are_refused(tmp_path):
    with pytest.raises(NotRegularFile, match="is a directory"):
        read_text(tmp_path)
    with pytest.raises(NotRegularFile, match="is a character device"):
        read_text("/dev/zero")  # endless: a read without the check would never end


def test_a_file_over_the_limit_is_not_read(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 1001)
    with pytest.raises(FileTooLarge, match="is 1001 bytes, more than the 1000 read here"):
        read_text(tmp_path / "big", 1000)
    assert read_text(tmp_path / "big", 1001) == "x" * 1001
