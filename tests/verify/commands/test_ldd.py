"""`python -m verify ldd`: output lines, exit codes, --json, --library-path, bad input (the real CLI in a
subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.elfbuild import ElfBuilder, real_ldd

REPO = Path(__file__).resolve().parents[3]


def verify(*argv, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verify", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.fixture
def b(tmp_path):
    return ElfBuilder(tmp_path)


def test_prints_ldds_lines_and_exits_0_when_all_found(b):
    b.lib("d/libok.so", soname="libok.so")
    top = b.lib("t/libtop.so", needed=["libok.so"], runpath=str(b.path("d")))
    result = verify("ldd", top)
    assert result.returncode == 0, result.stderr
    expected, _ = real_ldd(top)
    assert result.stdout.splitlines() == expected
    assert f"\tlibok.so => {b.path('d/libok.so')}" in result.stdout.splitlines()


def test_missing_library_exits_1_and_json_says_where_it_looked(b):
    top = b.lib("t/libtop.so", needed=["libgone.so.3"], runpath="/opt/rocm/lib:/opt/rocm-7.2.4/lib")
    result = verify("ldd", top)
    assert result.returncode == 1 and "\tlibgone.so.3 => not found" in result.stdout.splitlines()
    document = json.loads(verify("ldd", "--json", top).stdout)
    missing = [r for r in document["requests"] if r["outcome"] == "not found"]
    assert missing[0]["description"].startswith(
        f"libgone.so.3 (needed by {top}) not found via RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib of {top}, "
        "ld.so.cache, system dirs"
    )
    assert document["schema"] == "verify.process/1" and not document["ok"]
    assert "libgone.so.3 => not found" in document["ldd"]


def test_json_tells_how_each_object_was_found_and_who_asked(b):
    b.lib("d/libok.so", soname="libok.so")
    top = b.lib("t/libtop.so", needed=["libok.so"], rpath=str(b.path("d")))
    objects = {o["path"]: o for o in json.loads(verify("ldd", "--json", top).stdout)["objects"]}
    found = objects[str(b.path("d/libok.so"))]
    assert (found["how"], found["requested_by"], found["via"]) == ("RPATH", str(top), f"RPATH {b.path('d')} of {top}")
    assert objects["/lib64/ld-linux-x86-64.so.2"]["how"] == "interpreter"


def test_library_path_option_and_environment(b):
    b.lib("env/libenv.so", soname="libenv.so")
    top = b.lib("t/libtop.so", needed=["libenv.so"])
    assert verify("ldd", top).returncode == 1
    assert verify("ldd", "--library-path", b.path("env"), top).returncode == 0
    assert verify("ldd", top, env={"LD_LIBRARY_PATH": str(b.path("env"))}).returncode == 0


@pytest.mark.parametrize("content", [None, b"", b"just text\n", b"\x7fELF\x02\x01\x01"])
def test_bad_input_exits_2_with_one_line_naming_the_file(tmp_path, content):
    path = tmp_path / "input"
    if content is not None:
        path.write_bytes(content)
    result = verify("ldd", path)
    assert result.returncode == 2 and not result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0]


def test_directory_and_bad_root_exit_2(tmp_path):
    assert verify("ldd", tmp_path).returncode == 2
    result = verify("ldd", "--root", tmp_path / "absent", "/bin/true")
    assert result.returncode == 2 and "--root" in result.stderr


def test_broken_file_in_the_way_is_a_finding_and_the_rest_is_listed(b):
    (b.path("bad")).mkdir()
    b.path("bad/libbroken.so").write_bytes(b"junk" * 40)  # not ELF: glibc stops there ("invalid ELF header")
    b.lib("d/libfine.so", soname="libfine.so")
    top = b.lib("t/libtop.so", needed=["libbroken.so", "libfine.so"], runpath=f"{b.path('bad')}:{b.path('d')}")
    result = verify("ldd", top)
    assert result.returncode == 1
    assert f"\tlibfine.so => {b.path('d/libfine.so')}" in result.stdout.splitlines()
    assert str(b.path("bad/libbroken.so")) in result.stderr and "invalid ELF header" in result.stderr


def test_elf_magic_with_an_unknown_class_is_skipped_like_another_class(b):
    """glibc only checks EI_CLASS against its own: any other value is "another class" and the search goes on."""
    (b.path("odd")).mkdir()
    b.path("odd/libodd.so").write_bytes(b"\x7fELF" + b"\0" * 100)
    top = b.lib("t/libtop.so", needed=["libodd.so"], runpath=str(b.path("odd")))
    result = verify("ldd", top)
    expected, _ = real_ldd(top)
    assert result.returncode == 1 and result.stdout.splitlines() == expected
    assert "\tlibodd.so => not found" in expected


@pytest.mark.parametrize("command", ["ldd", "process", "strays"])
def test_output_that_cannot_be_written_is_one_line_and_exit_2(b, command):
    """Issue 9 finding 10: `verify ldd --json > /dev/full` ended in a traceback."""
    top = b.lib("t/libtop.so", needed=["libc.so.6"])
    argv = {
        "ldd": ["ldd", "--json", top],
        "process": ["process", "--exe", sys.executable, "--dlopen", top, "--json"],
        "strays": ["strays", "--json"],
    }[command]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "verify", *map(str, argv)], stdout=full, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"verify {command}: cannot write the output (No space left on device)"]


def test_a_reader_that_stops_early_is_not_an_error(b):
    """`verify ldd … | head`: the closed pipe ends the command quietly (no traceback, no 'Exception ignored', exit 0).
    Here the reading end is closed before the command starts, so every write meets the closed pipe."""
    import os

    top = b.lib("t/libtop.so", needed=["libc.so.6"])
    for argv in (["ldd", top], ["ldd", "--json", top], ["strays"]):
        reading, writing = os.pipe()
        os.close(reading)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "verify", *map(str, argv)],
                stdout=writing,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
        finally:
            os.close(writing)
        assert done.returncode == 0 and done.stderr == "", (argv, done.stderr)
