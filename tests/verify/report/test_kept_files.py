"""verify/report/kept_files.py: reading what a host keeps as hostile input, and replacing a kept file in one step.

Real files in a scratch root: regular files, a symlink, a FIFO, a directory, a file too large. (The status task's
program — this module and verify/safe_read.py sent to a host's bare python3 — is run in tests/roles/status/.)
"""

from __future__ import annotations

import ast
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roles.status.facts import KEPT_READER_SOURCES
from verify.report.kept_files import KEPT, json_text, read_kept_files, replace_file

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
            "-I",
            "-c",
            "import sys; from verify.report.kept_files import main; sys.exit(main(sys.argv[1:]))",
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


def test_the_reader_imports_only_the_standard_library():
    """It is sent to hosts as source, with verify/safe_read.py: nothing else of the verifier may be needed."""
    names = [name for name, _ in KEPT_READER_SOURCES]
    assert names == ["verify.safe_read", "verify.report.kept_files"]
    for name, source in KEPT_READER_SOURCES:
        tree = ast.parse(source)
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        ours = {module for module in imported if module.split(".")[0] == "verify"}
        assert ours <= set(names[: names.index(name)]), (name, ours)  # only what is sent before it
        others = {module.split(".")[0] for module in imported - ours}
        assert others <= set(sys.stdlib_module_names) | {"__future__"}, (name, others)


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


def test_json_text_is_json_dumps_text_for_hostile_text_and_every_plain_type():
    """The status program prints with json_text (no json import on the host): byte for byte what json.dumps gives,
    for text a kept file can hold (every escape, non-ASCII, astral and lone surrogates — a host name from uname(2) is
    decoded with surrogateescape), numbers at the edges and nesting."""
    text = "".join(chr(c) for c in range(0, 0x800)) + '\U0001f600\udc80\ud800"\\\u2028\u2029\x7f'
    values = [
        {
            "hostname": "ws\udcff1",
            "now": 1796248478.7284958,
            "files": {
                "verification": {"path": "/var/lib/rocm-fleet/last-verify.json", "text": text},
                "apt_hook": {"path": "/x", "missing": True},
                "boot_check": {"path": "/y", "error": "/y: a FIFO"},
            },
        },
        [0, -1, 2**70, -0.0, 1e300, 5e-324, 0.1, float("nan"), float("inf"), float("-inf"), True, False, None],
        {"": [], "a": {}, "b": [[{"c": ()}]]},
        "",
    ]
    for value in values:
        assert json_text(value) == json.dumps(value)
    assert json.loads(json_text(values[0])) == values[0]  # and it reads back
    for bad in ({1: "x"}, {"x": object()}, {"x": b"bytes"}):
        with pytest.raises(TypeError):
            json_text(bad)
