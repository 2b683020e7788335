"""`python -m verify process`: dlopen order, callers, exit codes (the real CLI in a subprocess).

The torch + bitsandbytes case (libgomp bound to torch's copy) is in tests/verify/ld/test_process.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.elfbuild import ElfBuilder

REPO = Path(__file__).resolve().parents[3]


def verify(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verify", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def b(tmp_path):
    return ElfBuilder(tmp_path)


def test_second_dlopen_binds_to_the_first_ones_soname(b):
    b.lib("first/libshared.so", soname="libshared.so.3")
    first = b.lib("first/libfirst.so", needed=["libshared.so"], runpath="$ORIGIN")
    b.lib("other/libshared.so.3", soname="libshared.so.3")
    second = b.lib("second/libsecond.so", needed=["libshared.so.3"], runpath=str(b.path("other")))
    prog = b.exe("bin/prog")
    result = verify("process", "--exe", prog, "--dlopen", first, "--dlopen", second)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        f"libshared.so.3 (needed by {second}) => {b.path('first/libshared.so')} (already loaded, matched by soname)"
    ) in result.stdout
    document = json.loads(verify("process", "--exe", prog, "--dlopen", first, "--dlopen", second, "--json").stdout)
    assert [o["path"] for o in document["objects"] if o["dlopened"]] == [str(first), str(second)]


def test_dlopen_from_a_caller_uses_its_paths(b):
    b.lib("hidden/libbyname.so", soname="libbyname.so")
    caller = b.lib("c/libcaller.so", rpath=str(b.path("hidden")))
    prog = b.exe("bin/prog")
    assert verify("process", "--exe", prog, "--dlopen", caller, "--dlopen", "libbyname.so").returncode == 1
    result = verify("process", "--exe", prog, "--dlopen", caller, "--dlopen-from", caller, "libbyname.so")
    assert result.returncode == 0, result.stdout


def test_bad_executable_exits_2(tmp_path):
    (tmp_path / "notelf").write_text("hello\n")
    result = verify("process", "--exe", tmp_path / "notelf", "--dlopen", "libc.so.6")
    assert result.returncode == 2 and str(tmp_path / "notelf") in result.stderr


def test_a_bad_dlopened_file_is_a_finding_and_the_rest_goes_on(b, tmp_path):
    (tmp_path / "libjunk.so").write_bytes(b"junk" * 40)
    good = b.lib("d/libgood.so", soname="libgood.so")
    result = verify(
        "process", "--exe", b.exe("bin/prog"), "--dlopen", tmp_path / "libjunk.so", "--dlopen", good, "--json"
    )
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["findings"][0]["path"] == str(tmp_path / "libjunk.so")
    assert str(good) in [o["path"] for o in document["objects"]]
