"""roles/venv/wheelhouse_server.py and the controller's handle on it (roles/venv/wheelhouse_pull.WheelhouseServer),
for real: the server process on a loopback port, asked with urllib and with the real pip's --find-links. It serves
the wheels of complete sets and nothing else, read-only, and stops when its controller closes the pipe or dies."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from localfleet.ports import free_port
from roles.validators import split_address
from roles.venv.wheelhouse import STAMP
from roles.venv.wheelhouse_pull import SERVER_SCRIPT, WheelhouseServer, fleet_addresses
from roles.venv.wheelhouse_server import READY
from tests.support.dummy_wheel import WHEEL, dummy_wheel
from tests.support.http_get import http_get
from tests.support.waiting import wait_for


def _complete_set(root: Path, name: str = "cp311-manylinux_2_36_x86_64") -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    data = dummy_wheel(directory / WHEEL)
    stamp = {"recipe": {}, "files": {WHEEL: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}}
    (directory / STAMP).write_text(json.dumps(stamp))
    (directory / "requirements.txt").write_text(
        f"rocm-fleet-dummy==1.0 --hash=sha256:{hashlib.sha256(data).hexdigest()}\n"
    )
    return directory


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "wheelhouse"
    directory = _complete_set(root)
    server = WheelhouseServer(str(root), "127.0.0.1", free_port())
    assert server.start() is None, server.failure
    try:
        yield server, directory
    finally:
        server.stop()


def _get(server: WheelhouseServer, path: str) -> tuple[int, bytes]:
    return http_get(f"http://127.0.0.1:{server.port}{path}")


def test_serves_the_index_and_the_wheels_of_a_complete_set_and_counts_the_bytes(served):
    server, directory = served
    status, page = _get(server, f"/{directory.name}/")
    assert status == 200 and f'<a href="{WHEEL}">'.encode() in page
    status, data = _get(server, f"/{directory.name}/{WHEEL}")
    assert status == 200 and data == (directory / WHEEL).read_bytes()
    server.stop()
    assert server.served == f"served {len(data)} bytes in 1 files"


def test_serves_nothing_else(served, tmp_path):
    server, directory = served
    (directory / "notes.whl").write_bytes(b"not in the stamp")
    (directory / ".partial-x").mkdir()
    (tmp_path / "secret").write_text("outside")
    incomplete = directory.parent / "cp312-manylinux_2_36_x86_64"
    incomplete.mkdir()
    (incomplete / WHEEL).write_bytes(b"no stamp: not a complete set")
    for path in (
        f"/{directory.name}/{STAMP}",
        f"/{directory.name}/requirements.txt",
        f"/{directory.name}/notes.whl",
        f"/{directory.name}/..%2F..%2Fsecret",
        "/../secret",
        "/",
        f"/{incomplete.name}/",
        f"/{incomplete.name}/{WHEEL}",
        f"/{directory.name}/.partial-x/",
    ):
        assert _get(server, path)[0] == 404, path
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/{directory.name}/{WHEEL}", data=b"x", method="PUT"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 501


def test_a_wheel_swapped_for_a_symlink_is_not_followed(served, tmp_path):
    server, directory = served
    (tmp_path / "elsewhere").write_bytes(b"what the link points at")
    (directory / WHEEL).unlink()
    (directory / WHEEL).symlink_to(tmp_path / "elsewhere")
    assert _get(server, f"/{directory.name}/{WHEEL}")[0] == 404


def test_pip_installs_from_it_with_find_links_and_require_hashes(served, tmp_path):
    server, directory = served
    target = tmp_path / "target"
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
            f"http://127.0.0.1:{server.port}/{directory.name}/",
            "--require-hashes",
            "-r",
            str(directory / "requirements.txt"),
            "--target",
            str(target),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "rocm_fleet_dummy" / "__init__.py").read_text() == "x = 1\n"


def test_a_taken_port_is_one_line(served, tmp_path):
    server, _ = served
    other = WheelhouseServer(str(tmp_path), "127.0.0.1", server.port)
    assert other.start() == f"cannot listen on 127.0.0.1:{server.port}: Address already in use"
    assert other.process is None


def test_it_stops_when_the_controller_process_dies(tmp_path):
    """The pipe is its lifeline: a controller killed with SIGKILL (no atexit, no callback) still leaves no server."""
    root = tmp_path / "wheelhouse"
    _complete_set(root)
    port = free_port()
    controller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
        from roles.venv.wheelhouse_pull import WheelhouseServer
        server = WheelhouseServer({str(root)!r}, "127.0.0.1", {port})
        assert server.start() is None, server.failure
        print(server.process.pid, flush=True)
        time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = int(controller.stdout.readline())
    try:
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
        # The server notices the closed pipe and exits: wait for that (bounded only by pytest-timeout).
        while True:
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{server_pid}/stat").read_text().split(") ")[1].startswith("Z"):
                break  # exited; its parent (killed) cannot reap it, init will
            os.sched_yield()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        try:
            os.kill(server_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_split_address():
    assert split_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert split_address("[::1]:8765") == ("::1", 8765)
    assert split_address("controller.lab:80") == ("controller.lab", 80)
    for bad in (
        "8765",
        "127.0.0.1:",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        ":8765",
        "[::1:8765",
        "host:port",
        "[]:80",
        "a b:80",
        "$(id):80",
    ):
        with pytest.raises(ValueError):
            split_address(bad)


# --- who it serves, how long it waits, how many at once (issue 26, item 8) -------------------------------------------


def _server(root: Path, *options: str) -> tuple[subprocess.Popen, int]:
    """The server script itself with `options`, listening on 127.0.0.1; (process, port)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-I", str(SERVER_SCRIPT), *options, str(root), "127.0.0.1", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().startswith(READY)
    return process, port


def _stop(process: subprocess.Popen) -> str:
    out, _ = process.communicate(timeout=120)
    return out.strip().splitlines()[-1]


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=300, source_address=(source, 0))
    return connection


def _ask(connection: socket.socket, path: str) -> bytes:
    """Send one GET and read the answer until the server closes (b"" when it closed without answering)."""
    try:
        connection.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except ConnectionResetError:
        return b""


def test_only_the_fleets_addresses_are_served_and_the_others_are_counted(tmp_path):
    """127.0.0.2 is the fleet here; a client from 127.0.0.1 (this machine's other accounts, say) gets nothing."""
    root = tmp_path / "wheelhouse"
    directory = _complete_set(root)
    process, port = _server(root, "--allow", "127.0.0.2")
    try:
        assert _ask(_connect(port, "127.0.0.1"), f"/{directory.name}/{WHEEL}") == b""
        answer = _ask(_connect(port, "127.0.0.2"), f"/{directory.name}/{WHEEL}")
        assert answer.startswith(b"HTTP/1.0 200") and answer.endswith((directory / WHEEL).read_bytes())
    finally:
        last = _stop(process)
    size = (directory / WHEEL).stat().st_size
    assert last == (
        f"served {size} bytes in 1 files; refused connections from 127.0.0.1 (1): not an address of the fleet's hosts"
    )


def test_the_controllers_server_allows_the_run_hosts_addresses(tmp_path):
    """fleet_addresses: each host's ssh_hostname (else its name) as the controller resolves it, loopback only for a
    server that listens there."""

    class _Host:
        def __init__(self, name, data):
            self.name, self.data = name, data

    class _State:
        inventory = [_Host("ws1", {"ssh_hostname": "127.0.0.3"}), _Host("no-such-host.invalid", {})]

    assert fleet_addresses(_State(), "10.0.0.1") == {"127.0.0.3"}
    assert fleet_addresses(_State(), "127.0.0.1") == {"127.0.0.3", "127.0.0.1", "::1"}


def test_a_connection_that_sends_nothing_is_closed_after_the_timeout(tmp_path):
    root = tmp_path / "wheelhouse"
    directory = _complete_set(root)
    process, port = _server(root, "--timeout", "1")
    try:
        silent = _connect(port)
        assert silent.recv(1) == b""  # the server closed it: no request line came within its timeout
        assert _ask(_connect(port), f"/{directory.name}/").startswith(b"HTTP/1.0 200")
    finally:
        _stop(process)


def _accept_queue(port: int) -> int:
    """Connections the kernel holds for the listening socket on `port`, not yet accepted (rx_queue of LISTEN)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":
            return int(fields[4].split(":")[1], 16)
    return -1


def test_connections_past_the_bound_wait_until_one_is_free(tmp_path):
    """--max-connections 2: two silent clients take both slots; a third waits, not accepted, until one leaves."""
    root = tmp_path / "wheelhouse"
    directory = _complete_set(root)
    process, port = _server(root, "--max-connections", "2")
    try:
        first, second = _connect(port), _connect(port)
        third = _connect(port)
        third.sendall(f"GET /{directory.name}/ HTTP/1.0\r\n\r\n".encode())
        wait_for(lambda: _accept_queue(port) == 1, "the third connection to wait in the listen queue")
        first.close()
        answer = _ask(third, "")
        assert answer.startswith(b"HTTP/1.0 200") and WHEEL.encode() in answer
        second.close()
    finally:
        _stop(process)
