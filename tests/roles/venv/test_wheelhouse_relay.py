"""The seed's server command (roles/venv/wheelhouse_relay.seed_server_command) for real, on this machine as root — the
exact shell line a seed host runs over SSH: it serves the `*.whl` files of one flat directory as one set, as `nobody`,
to the real pip with --require-hashes, and stops when its standard input closes. The whole relay over SSH on a local
fleet is tests/roles/venv/test_relay_real_run.py."""

from __future__ import annotations

import hashlib
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from localfleet.ports import free_port
from roles.venv.wheelhouse_relay import relay_failure_line, seed_server_command
from roles.venv.wheelhouse_server import READY
from tests.support.dummy_wheel import WHEEL, dummy_wheel
from tests.support.http_get import http_get

pytestmark = pytest.mark.root

SET = "cp311-manylinux_2_36_x86_64"


@pytest.fixture
def flat():
    """A seed's wheelhouse directory: flat, root's, world-readable (pytest's tmp_path is root's only: nobody could not
    read it) — one wheel, requirements.txt with its hash, the upload's record, and things that must not be served."""
    top = Path(tempfile.mkdtemp(prefix="relay-test-"))
    try:
        top.chmod(0o755)
        directory = top / "wheelhouse"
        directory.mkdir(mode=0o755)
        data = dummy_wheel(directory / WHEEL)
        (directory / "requirements.txt").write_text(
            f"rocm-fleet-dummy==1.0 --hash=sha256:{hashlib.sha256(data).hexdigest()}\n"
        )
        (directory / ".rocm-fleet-sha256").write_text("record\n")
        (top / "secret.whl").write_bytes(b"outside the wheelhouse")
        (directory / "linked-1.0-py3-none-any.whl").symlink_to(top / "secret.whl")
        for path in [directory, *directory.iterdir()]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        yield directory
    finally:
        shutil.rmtree(top)


def _start(directory: Path, port: int) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        ["sh", "-c", seed_server_command(str(directory), SET, "127.0.0.1", port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return process, process.stdout.readline().decode().strip()


def _status(port: int, path: str) -> tuple[int, bytes]:
    return http_get(f"http://127.0.0.1:{port}{path}")


def test_the_seed_serves_its_wheels_as_nobody_to_pip_and_stops_when_its_stdin_closes(flat, tmp_path):
    port = free_port()
    process, first = _start(flat, port)
    try:
        assert first == f"{READY}127.0.0.1:{port}", process.stderr.read()
        # sh exec'd setpriv, which exec'd python3: the same process, now nobody's with nobody's group only.
        status = dict(line.split(":", 1) for line in Path(f"/proc/{process.pid}/status").read_text().splitlines())
        nobody = pwd.getpwnam("nobody")
        assert status["Uid"].split() == [str(nobody.pw_uid)] * 4
        assert status["Gid"].split() == [str(nobody.pw_gid)] * 4
        assert status["Groups"].split() == []

        assert _status(port, f"/{SET}/")[1].count(b"<a href=") == 1
        for path in (
            f"/{SET}/requirements.txt",
            f"/{SET}/.rocm-fleet-sha256",
            f"/{SET}/linked-1.0-py3-none-any.whl",
            f"/cp312-manylinux_2_36_x86_64/{WHEEL}",
            "/cp312-manylinux_2_36_x86_64/",
            "/",
            "/secret.whl",
        ):
            assert _status(port, path)[0] == 404, path
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--isolated",
                "--disable-pip-version-check",
                "--no-index",
                "--no-cache-dir",
                "--find-links",
                f"http://127.0.0.1:{port}/{SET}/",
                "--require-hashes",
                "-r",
                str(flat / "requirements.txt"),
                "--target",
                str(tmp_path / "target"),
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (tmp_path / "target" / "rocm_fleet_dummy" / "__init__.py").read_text() == "x = 1\n"

        out, _ = process.communicate(b"", timeout=60)  # closes its standard input: the controller's signal
        assert process.returncode == 0
        assert out.decode().split("\n")[-2] == f"served {(flat / WHEEL).stat().st_size} bytes in 1 files"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_taken_port_is_its_one_first_line(flat):
    port = free_port()
    first_server, first = _start(flat, port)
    try:
        assert first.startswith(READY)
        second, line = _start(flat, port)
        second.communicate(timeout=60)
        assert line == f"cannot listen on 127.0.0.1:{port}: Address already in use"
        assert second.returncode == 1
    finally:
        first_server.communicate(b"", timeout=60)


def test_a_login_that_is_not_root_serves_as_itself(flat):
    """An SSH login that is not root (and no sudo) cannot switch accounts: the command then serves as that login."""
    nobody = pwd.getpwnam("nobody")
    port = free_port()
    process = subprocess.Popen(
        ["sh", "-c", seed_server_command(str(flat), SET, "127.0.0.1", port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
    )
    try:
        assert process.stdout.readline().decode().strip() == f"{READY}127.0.0.1:{port}", process.stderr.read()
        assert _status(port, f"/{SET}/{WHEEL}") == (200, (flat / WHEEL).read_bytes())
    finally:
        process.communicate(b"", timeout=60)
    assert process.returncode == 0


def test_the_failure_line_names_host_seed_address_and_fix():
    assert relay_failure_line("ws2", "ws1", "10.0.0.11", 8765, "the seed is not in this run") == (
        "ws2: wheelhouse_seed ws1: it cannot serve the wheelhouse at 10.0.0.11:8765 (the seed is not in this run) — "
        "run the seed in the same run, and give wheelhouse_seed_serve a free port on an address of the seed that "
        "the other hosts reach"
    )
