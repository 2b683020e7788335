"""verify/safe_read.py: real FIFOs, device nodes, sockets, symlinks, directories and sparse files, and the deadline."""

from __future__ import annotations

import os

import pytest

from tests.support.hostile_files import KINDS, fifo_readers, plant
from verify import safe_read
from verify.safe_read import FileTooLarge, NotRegularFile, OutOfTime

WORDS = {
    "fifo": "a FIFO (a named pipe: opening it would block), not a regular file",
    "chardev": "a character device, not a regular file",
    "symlink to /dev/zero": "a character device, not a regular file",
    "socket": "a socket, not a regular file",
    "directory": "a directory, not a regular file",
}


@pytest.mark.parametrize("kind", KINDS)
def test_only_regular_files_are_opened(tmp_path, kind):
    if kind == "chardev" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    path = plant(tmp_path / "thing", kind)
    with fifo_readers(path) as opened:
        for reader in (lambda: safe_read.open_regular(path), lambda: safe_read.read_bytes(path, 100)):
            with pytest.raises(NotRegularFile) as caught:
                reader()
            assert caught.value.strerror == WORDS[kind] and caught.value.filename == str(path)
    assert opened.count == 0


def test_a_symlink_is_refused_where_it_must_not_be_followed(tmp_path):
    (tmp_path / "real").write_bytes(b"data")
    (tmp_path / "link").symlink_to("real")
    assert safe_read.read_bytes(tmp_path / "link", 10) == b"data"
    with pytest.raises(NotRegularFile, match="a symbolic link"):
        safe_read.read_bytes(tmp_path / "link", 10, follow=False)
    with pytest.raises(FileNotFoundError):
        safe_read.read_bytes(tmp_path / "absent", 10)


def test_reads_are_bounded_by_the_limit_not_by_what_the_file_claims(tmp_path):
    sparse = tmp_path / "status"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 40)  # a real 1 TiB file that costs no disk
    with pytest.raises(FileTooLarge) as caught:
        safe_read.read_bytes(sparse, 1 << 20)
    assert caught.value.strerror == "1099511627776 bytes, more than the 1 MiB any real one has"
    (tmp_path / "small").write_text("Package: x\n")
    assert safe_read.read_text(tmp_path / "small", 11) == "Package: x\n"
    with pytest.raises(FileTooLarge):
        safe_read.read_text(tmp_path / "small", 10)


def test_files_in_proc_that_say_size_0_are_read_up_to_the_limit():
    assert b"processor" in safe_read.read_bytes("/proc/cpuinfo", 16 << 20)
    with pytest.raises(FileTooLarge):
        safe_read.read_bytes("/proc/self/status", 10)


def test_past_the_deadline_every_open_and_listing_stops_with_out_of_time(tmp_path):
    (tmp_path / "f").write_text("x")
    with safe_read.time_limit(0):
        with pytest.raises(OutOfTime) as caught:
            safe_read.read_bytes(tmp_path / "f", 10)
        assert str(caught.value) == f"not finished within 0 s (stopped before reading {tmp_path / 'f'})"
        with pytest.raises(OutOfTime, match="stopped before listing"):
            safe_read.listdir(tmp_path)
        with safe_read.time_limit(None):  # an inner block without a limit
            assert safe_read.listdir(tmp_path) == ["f"]
    assert safe_read.read_bytes(tmp_path / "f", 10) == b"x"  # the limit ends with its block
    assert not issubclass(OutOfTime, OSError)  # so `except OSError` on the way never swallows it
