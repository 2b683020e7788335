"""roles/venv/facts.py: each fact's shell text run for real on this machine, and its output parsed — and none of them
runs anything of the venv (they run as root, the venv is an ordinary account's)."""

from __future__ import annotations

import inspect
import os
import platform
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from roles.venv.facts import HostPython3, VenvContents
from roles.venv.model import HostPython, VenvState
from tests.support.host_pythons import OTHER_PYTHONS, interpreter, path_with

ME = pwd.getpwuid(os.getuid()).pw_name


def run_fact(fact, env=None, **arguments):
    if "owner" in inspect.signature(fact.command).parameters:
        arguments.setdefault("owner", ME)
    # No time limit: pytest-timeout is the hang guard (a regression whose fact blocks on a FIFO fails there).
    done = subprocess.run(["/bin/sh", "-c", fact.command(**arguments)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return fact.process(done.stdout.splitlines())


def test_host_python3_of_this_machine():
    found = run_fact(HostPython3())
    version = subprocess.run(
        ["python3", "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == HostPython(version, os.confstr("CS_GNU_LIBC_VERSION").split()[1], platform.machine())


def test_host_without_python3_says_none():
    assert run_fact(HostPython3(), env={"PATH": "/nonexistent"}) is None


def test_host_python3_refuses_a_non_glibc_system():
    """What the command prints on a musl host (Alpine): getconf knows no GNU_LIBC_VERSION there."""
    with pytest.raises(FactProcessError, match="host python3 3.12.1: not a glibc system"):
        HostPython3().process(["Python 3.12.1", "libc unknown", "x86_64"])


def test_host_python3_output_that_is_not_the_three_lines_is_a_fact_error():
    with pytest.raises(FactProcessError, match="unreadable output"):
        HostPython3().process(["Traceback (most recent call last):"])


def test_venv_contents_of_a_fresh_venv(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    found = run_fact(VenvContents(), path=str(tmp_path / "v"))
    assert isinstance(found, VenvState)
    assert found.python == platform.python_version()
    assert found.owner == ME
    assert "torch" not in found.packages
    assert found.broken is None and found.foreign is None


@pytest.mark.parametrize("version", sorted(OTHER_PYTHONS))
def test_venv_contents_read_by_each_hosts_python3_is_what_debians_reads(tmp_path, version):
    """The program runs under the host's python3: Ubuntu 22.04's 3.10, 24.04's 3.12, 3.13
    (tests/support/host_pythons.py) against this machine's 3.11, on a venv with a package in it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    (site / "Caf\u00e9_Pkg-1.0+local.dist-info").mkdir()
    (site / "Caf\u00e9_Pkg-1.0+local.dist-info" / "METADATA").write_text(
        "Name: Caf\u00e9_Pkg\nVersion: 1.0+local\n\nbody\n"
    )
    python3 = interpreter(version)
    theirs = run_fact(VenvContents(), env={**os.environ, "PATH": path_with(python3)}, path=str(tmp_path / "v"))
    assert theirs == run_fact(VenvContents(), path=str(tmp_path / "v"))
    assert theirs.packages == {"caf\u00e9-pkg": "1.0+local"} and theirs.broken is None


def test_venv_contents_absent_and_broken(tmp_path):
    assert run_fact(VenvContents(), path=str(tmp_path / "nothing")) is None
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = tmp_path / "v" / "bin" / "python"
    python.unlink()
    python.symlink_to("/usr/bin/python3.0-gone")  # the interpreter the venv was made from was removed
    assert (
        run_fact(VenvContents(), path=str(tmp_path / "v")).broken == "bin/python points to an interpreter that is gone"
    )


def test_venv_contents_path_with_a_space(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "a venv")], check=True)
    assert isinstance(run_fact(VenvContents(), path=str(tmp_path / "a venv")), VenvState)


@pytest.mark.slow
def test_venv_contents_sees_local_version_labels():
    from tests.support.venvs import TORCH_CPU, ensure_venv

    venv = ensure_venv("torch-cpu", TORCH_CPU)
    found = run_fact(VenvContents(), path=str(venv))
    assert found.packages["torch"] == "2.13.0+cpu"  # the label pyinfra's pip fact drops
    assert found.packages["bitsandbytes"] == "0.50.1"
    assert found.owner == pwd.getpwuid(Path(venv).stat().st_uid).pw_name


def test_the_venvs_own_code_never_runs(tmp_path):
    """Issue 9, Critical: the fact ran VENV/bin/python as root, and a .pth file in site-packages runs at every start
    of that interpreter. Both are planted here; the fact reads the venv as data and neither runs."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    ran = tmp_path / "ran"
    python = tmp_path / "v" / "bin" / "python"
    python.unlink()
    python.write_text(f'#!/bin/sh\necho python >> {ran}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    (site / "zz.pth").write_text(f"import os; open({str(ran)!r}, 'a').write('pth %d\\n' % os.getuid())\n")
    info = site / "torch-2.13.0+rocm7.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+rocm7.2\n\nLong text\n")
    found = run_fact(VenvContents(), path=str(tmp_path / "v"))
    assert found.packages == {"torch": "2.13.0+rocm7.2"}
    assert not ran.exists(), ran.read_text()


def test_a_fifo_or_huge_file_in_the_venv_does_not_hang_or_flood_the_fact(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    (site / "evil-1.dist-info").mkdir()
    os.mkfifo(site / "evil-1.dist-info" / "METADATA")  # nobody ever writes: a blocking read would wait forever
    (site / "big-1.dist-info").mkdir()
    with open(site / "big-1.dist-info" / "METADATA", "wb") as big:
        big.truncate(1 << 34)  # 16 GiB, sparse: read whole, it would take the machine's memory
    (site / "ok-1.0.dist-info").mkdir()
    (site / "ok-1.0.dist-info" / "METADATA").write_text("Name: ok\nVersion: 1.0\n")
    found = run_fact(VenvContents(), path=str(tmp_path / "v"))
    assert found.packages == {"ok": "1.0"}


HOSTILE = ("regular", "too large", "fifo", "chardev", "symlink to /dev/zero", "socket", "directory")


@pytest.mark.parametrize("kind", HOSTILE)
def test_the_facts_copy_of_safe_read_reads_what_safe_read_reads(tmp_path, kind):
    """The fact's script cannot import verify/ on a host, so it carries a copy of verify/safe_read.py's read_text
    (roles/venv/facts.py `_READ_TEXT`): on every kind of hostile file both read the same text or both refuse."""
    from roles.venv import facts
    from tests.support.hostile_files import plant
    from verify.safe_read import read_text
    from verify.stack.venv_layout import MAX_METADATA

    copy: dict = {}
    exec(facts._READ_TEXT, copy)
    assert copy["LIMIT"] == MAX_METADATA
    path = tmp_path / "METADATA"
    if kind == "regular":
        path.write_bytes(b"Name: ok\nVersion: 1.0\n\xff\n")
    elif kind == "too large":
        with open(path, "wb") as big:
            big.truncate(MAX_METADATA + 1)
    else:
        if kind == "chardev" and os.geteuid() != 0:
            pytest.skip("mknod needs root")
        plant(path, kind)

    def outcome(read):
        try:
            return read()
        except OSError:
            return OSError

    ours = outcome(lambda: copy["text"](str(path)))
    assert ours == outcome(lambda: read_text(path, MAX_METADATA, errors="replace", follow=False))
    assert (ours is OSError) == (kind != "regular")


def test_files_of_another_account_in_the_venv_are_named(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    assert run_fact(VenvContents(), path=str(tmp_path / "v"), owner="root").foreign is None
    stray = tmp_path / "v" / "pyvenv.cfg"
    os.chown(stray, 65534, 65534)
    assert run_fact(VenvContents(), path=str(tmp_path / "v"), owner="root").foreign == str(stray)


def test_a_foreign_file_deep_in_the_venv_is_named_through_a_linked_venv_path_and_links_inside_are_not_followed(
    tmp_path,
):
    """The walk as it was with os.walk + lstat: the top followed when it is a symlink, every entry below looked at
    without following it, named by the path given."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    (tmp_path / "v-link").symlink_to(tmp_path / "v")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "theirs").write_text("")
    os.chown(elsewhere / "theirs", 65534, 65534)
    (tmp_path / "v" / "lib" / "to-elsewhere").symlink_to(elsewhere)  # the link is root's; what it points to is not
    assert run_fact(VenvContents(), path=str(tmp_path / "v-link"), owner="root").foreign is None
    deep = tmp_path / "v" / "lib" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "theirs.py").write_text("")
    os.chown(deep / "theirs.py", 65534, 65534)
    assert run_fact(VenvContents(), path=str(tmp_path / "v-link"), owner="root").foreign == str(
        tmp_path / "v-link" / "lib" / "a" / "b" / "theirs.py"
    )
    assert run_fact(VenvContents(), path=str(tmp_path / "v"), owner="root").foreign == str(deep / "theirs.py")


def test_unreadable_output_is_a_fact_error():
    with pytest.raises(FactProcessError, match="unreadable output"):
        VenvContents().process(["Traceback (most recent call last):"])
