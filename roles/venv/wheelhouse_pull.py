"""Pull mode of the wheelhouse: the hosts download the wheels over HTTP(S) — from any server (`wheelhouse_url`) or
from the controller's own, started for the run (`wheelhouse_serve`) — instead of the controller pushing them over SSH.

The controller still prepares the wheelhouse (roles/venv/wheelhouse.py) and computes every wheel's sha256; only
`requirements.txt`, which carries those hashes, goes to the host over SSH (checked like every upload,
roles/uploads.py). pip then installs with `--no-index --find-links URL/<set>/ --require-hashes -r requirements.txt`:
what the server sends is installed only when it has the controller's hashes, so integrity does not rest on the
server nor on plain HTTP. Bytes through the controller's pyinfra process: the requirements file per host, not the
wheelhouse per host.

The controller's own server (roles/venv/wheelhouse_server.py, a child process) is started by the first host that
actually installs — a command of the install operation that runs on the controller at execution, so `--dry` and a
run with nothing to install start none — and stopped when the run ends: when the last host disconnects (pyinfra's
last callback, also after a failed run), at interpreter exit, and by the kernel when the controller dies (its
standard input is a pipe from this process).
"""

from __future__ import annotations

import atexit
import shlex
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from pyinfra import logger
from pyinfra.api import FunctionCommand
from pyinfra.api.state import BaseStateCallback

from roles.run_memory import memory_of
from roles.validators import is_loopback
from roles.venv import wheelhouse_server

SERVER_SCRIPT = Path(wheelhouse_server.__file__)


@dataclass(frozen=True)
class PullSource:
    """Where a host pulls its wheel set from: `url` (the wheelhouse's base URL, without the set), and the server to
    run for it — the controller's own (`serve`: root, address, port) or a seed host's (`seed`: host name, address,
    port; roles/venv/wheelhouse_relay.py) — or neither when another server is there already."""

    url: str
    serve: tuple[str, str, int] | None = None
    seed: tuple[str, str, int] | None = None

    def find_links(self, set_name: str) -> str:
        return f"{self.url}/{set_name}/"


def fleet_addresses(state, listen_address: str) -> frozenset[str]:
    """The addresses the run's hosts connect from, as this controller resolves their SSH names (ssh_hostname, else
    the inventory name) — the server's allow-list. A server on a loopback address also serves this machine itself:
    only local processes reach it there (a forward that wheelhouse_url names, or hosts that share this machine)."""
    found: set[str] = set()
    for host in state.inventory:
        name = host.data.get("ssh_hostname") or host.name
        try:
            found.update(info[4][0] for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP))
        except (OSError, UnicodeError):
            continue  # a host the controller cannot resolve cannot be reached by SSH either: it installs nothing
    if is_loopback(listen_address):
        found.update(("127.0.0.1", "::1"))
    return frozenset(found)


class WheelhouseServer:
    """One server process (see the module docstring)."""

    def __init__(self, root: str, address: str, port: int, allow: frozenset[str] | None = None):
        self.root, self.address, self.port = root, address, port
        self.allow = allow
        self.process: subprocess.Popen | None = None
        self.failure: str | None = None
        self.served: str | None = None  # its last line: "served BYTES bytes in N files"

    def start(self) -> str | None:
        """Start it and wait until it listens; None, or why it could not (one line)."""
        allow = ["--allow", ",".join(sorted(self.allow))] if self.allow is not None else []
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(SERVER_SCRIPT), *allow, self.root, self.address, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd="/",
        )
        first = self.process.stdout.readline().strip()
        if not first.startswith(wheelhouse_server.READY):
            self.stop()
            self.failure = first or f"the server exited with status {self.process.returncode}"
            return self.failure
        return None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            out, _ = process.communicate(timeout=30)  # closes its standard input: its signal to stop
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        lines = [line for line in (out or "").splitlines() if line.strip()]
        self.served = lines[-1] if lines else None


class RunServers(BaseStateCallback):
    """The servers of one run — the controller's own (WheelhouseServer) and a seed's (roles/venv/wheelhouse_relay.py)
    — each started once, by the first host that asks, and stopped when the run's last host disconnects (as
    roles/verification/fleet.py's summary), or earlier: when the operation named at its start has ended on every
    host."""

    def __init__(self):
        self.servers: dict[tuple, WheelhouseServer] = {}
        self.lock = threading.Lock()  # a gevent lock under pyinfra's CLI: several hosts may ask at once
        self.disconnected: set[str] = set()
        # operation hash -> keys of servers to stop (and log with their `label`) when it ends
        self.until_end_of: dict[str, list[tuple]] = {}

    def ensure(self, key: tuple, make=None, until_end_of: str | None = None):
        """The server `key` names, started now unless it was already (`make()` makes it; default: the controller's
        own for `key` = (root, address, port))."""
        with self.lock:
            server = self.servers.get(key)
            if server is None:
                server = self.servers[key] = make() if make is not None else WheelhouseServer(*key)
                try:
                    failure = server.start()
                except Exception as error:  # noqa: BLE001 - the hosts that need it fail with one line, not a trace
                    failure = server.failure = f"{type(error).__name__}: {error}"
                if failure is None:
                    _running.add(server)
                    if until_end_of is not None:
                        self.until_end_of.setdefault(until_end_of, []).append(key)
            return server

    def stop_all(self) -> None:
        for server in self.servers.values():
            server.stop()
            _running.discard(server)

    def operation_end(self, state, op_hash):
        for key in self.until_end_of.pop(op_hash, []):
            server = self.servers[key]
            server.stop()
            _running.discard(server)
            if server.served:
                logger.info(f"{server.label}: {server.served}")

    def host_disconnect(self, state, host):
        self.disconnected.add(host.name)
        if {h.name for h in state.activated_hosts} <= self.disconnected:
            self.stop_all()


_running: set[WheelhouseServer] = set()


@atexit.register
def _stop_left_over() -> None:
    for server in list(_running):
        server.stop()


def servers_of(state) -> RunServers:
    memory = memory_of(state)
    if memory.wheelhouse_servers is None:
        memory.wheelhouse_servers = RunServers()
        state.add_callback_handler(memory.wheelhouse_servers)
    return memory.wheelhouse_servers


def serve_failure_line(host_name: str, serve: tuple[str, str, int], why: str) -> str:
    root, address, port = serve
    return (
        f"{host_name}: wheelhouse_serve {address}:{port}: the controller cannot serve {root} there ({why}) — "
        "choose a free port on an address of this machine the hosts reach, or set wheelhouse_serve: None"
    )


def _serve(state, host, serve: tuple[str, str, int]) -> bool:
    server = servers_of(state).ensure(serve, lambda: WheelhouseServer(*serve, fleet_addresses(state, serve[1])))
    if server.failure is not None:
        host.log_styled(serve_failure_line(host.name, serve, server.failure), fg="red", log_func=logger.error)
        return False
    return True


def serve_command(serve: tuple[str, str, int]) -> FunctionCommand:
    """A command, run on the controller at execution, that makes sure the run's server for `serve` is listening."""
    return FunctionCommand(_serve, (tuple(serve),), {})


def hash_mismatch_line(find_links: str, wheel: str = "WHEEL") -> str:
    """The one line of a host whose server sent a wheel with another sha256 (`wheel`: pip's "name==version from
    URL"; the shell fills it in)."""
    return (
        f"rocm-fleet: {wheel} does not have the sha256 the controller computed: nothing installed — the server "
        f"behind {find_links} does not serve the wheelhouse of this controller (give it the same files, or use "
        "another wheelhouse_url)"
    )


def pull_install(pip: str, find_links: str, requirements: str) -> str:
    """The shell command (for the venv's owner) that installs `requirements` from `find_links` only, each wheel with
    its hash, and fails with one line: pip's own output goes to a private file, of which the reason is taken."""
    install = (
        f"{pip} --no-index --find-links {shlex.quote(find_links)} --require-hashes --no-cache-dir "
        f"--retries 2 --timeout 60 -r {shlex.quote(requirements)}"
    )
    unreachable = f"rocm-fleet: pip could not install from {find_links}: "
    head, _, tail = hash_mismatch_line(find_links).partition("WHEEL")
    mismatch_head, mismatch_tail = shlex.quote(head), shlex.quote(tail)
    return (
        "log=$(mktemp) || exit 1; "
        f'{install} >"$log" 2>&1; status=$?; '
        "if [ $status -ne 0 ]; then "
        '  if grep -q "DO NOT MATCH THE HASHES" "$log"; then '
        '    wheel=$(grep -m 1 -E "^    [^ ]+ from " "$log" '
        '| sed -e "s/^ *//" -e "s/:$//" -e "s/ (from -r .*//" | cut -c 1-300); '
        f'    echo {mismatch_head}"$wheel"{mismatch_tail} >&2; '
        "  else "
        f'    echo {shlex.quote(unreachable)}"$(grep "^ERROR:" "$log" | tail -n 1 | cut -c 8-400)" >&2; '
        "  fi; "
        'fi; rm -f "$log"; exit $status'
    )
