"""verify/system/textfiles.py: a configuration file that cannot be used is one line naming it, never an exception or
a hang (the reading itself is verify/safe_read.py's, tested in tests/verify/test_safe_read.py)."""

from __future__ import annotations

import os

from verify.system.textfiles import list_dir, read_optional


def test_regular_file_reads_and_a_missing_one_is_none(tmp_path):
    (tmp_path / "environment").write_text("LD_LIBRARY_PATH=/opt/rocm/lib\n")
    assert read_optional(tmp_path / "environment") == ("LD_LIBRARY_PATH=/opt/rocm/lib\n", None)
    assert read_optional(tmp_path / "absent") == (None, None)
    assert read_optional(tmp_path / "absent" / "below") == (None, None)


def test_a_fifo_a_directory_and_a_huge_file_are_one_line_each(tmp_path):
    os.mkfifo(tmp_path / "environment")  # opened for reading, a FIFO without a writer would block for ever
    assert read_optional(tmp_path / "environment") == (
        None,
        f"{tmp_path}/environment: a FIFO (a named pipe: opening it would block), not a regular file",
    )
    assert read_optional(tmp_path)[1] == f"{tmp_path}: a directory, not a regular file"
    (tmp_path / "big").write_bytes(b"x" * 1001)
    assert (
        read_optional(tmp_path / "big", 1000)[1]
        == f"{tmp_path}/big: 1001 bytes, more than the 1000 bytes any real one has"
    )


def test_list_dir_is_sorted_and_empty_for_what_is_not_a_directory(tmp_path):
    for name in ("b", "a"):
        (tmp_path / name).touch()
    assert list_dir(tmp_path) == ["a", "b"] and list_dir(tmp_path / "a") == [] and list_dir(tmp_path / "x") == []
