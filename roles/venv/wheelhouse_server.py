"""The controller's own short-lived wheelhouse server (`wheelhouse_serve`): the hosts pull the wheels over HTTP, all at
once, instead of the controller pushing every byte to every host through its one pyinfra process over SSH.

    python3 -I roles/venv/wheelhouse_server.py [--allow A,B] ROOT ADDRESS PORT    # WheelhouseServer.start()
    python3 -I -c SOURCE [--allow A,B] --flat SET DIRECTORY ADDRESS PORT           # a seed (wheelhouse_relay.py)

A child process of the pyinfra run, standard library only: the files go out with sendfile(2) from the page cache, on
any core, not through the gevent loop that drives the SSH sessions. It prints one line when it listens, and exits
when its standard input closes — when the run ends (`WheelhouseServer.stop`), when the run fails, and when the
controller process dies in any way (the kernel closes the pipe): it never outlives the run. On exit it prints what it
served ("served BYTES bytes in N files").

What it serves, read-only (GET and HEAD, nothing else): for each complete wheel set under ROOT
(roles/venv/wheelhouse.py), the page `/<set>/` that links its wheels (what `pip --find-links URL/<set>/` reads) and
each wheel named in the set's stamp — regular files only, opened without following a symlink. Nothing else under ROOT
(locks, partial downloads, stamps) and nothing outside it. Integrity does not rest on this server nor on the network:
the hosts install with `--require-hashes` from the hashes the controller computed, uploaded to them over SSH.
Bind it to an address only the fleet reaches. `--allow`: only clients from these addresses (the fleet's hosts, as
the controller resolves them) are served; any other connection is closed unanswered and counted. A connection is
closed after CONNECTION_TIMEOUT seconds without progress, and at most MAX_CONNECTIONS are served at once (the rest
wait in the listen queue): a client that opens connections and sends nothing cannot exhaust the controller.

`--flat SET`: the wheels are the `*.whl` files of ROOT itself, served as the set SET only — a seed host's copy of
one set, pushed there by the controller (flat, without the stamp: roles/venv/deploy.py); run there as `nobody`.
"""

from __future__ import annotations

import argparse
import html
import ipaddress
import json
import os
import re
import socket
import stat
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

STAMP = ".complete.json"  # = roles.venv.wheelhouse.STAMP (this file imports nothing of the project: it runs alone)
READY = "listening "
MAX_STAMP_BYTES = 1 << 20
CONNECTION_TIMEOUT = 60  # seconds a socket operation may wait: a request line, a header, a client taking the file
MAX_CONNECTIONS = 64  # served at once: pip fetches one file at a time, so a few per host of a 50-host fleet
_PATH = re.compile(r"/([A-Za-z0-9][A-Za-z0-9._-]*)/([^/]*)")


def wheel_names(root: Path, set_name: str) -> frozenset[str]:
    """The wheels of the complete set `set_name` under `root` (empty when there is no such complete set)."""
    try:
        with open(root / set_name / STAMP, "rb") as opened:
            stamp = json.loads(opened.read(MAX_STAMP_BYTES))
        files = stamp["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    if not isinstance(files, dict):
        return frozenset()
    return frozenset(
        name
        for name in files
        if isinstance(name, str) and name.endswith(".whl") and "/" not in name and not name.startswith(".")
    )


def flat_wheel_names(directory: Path) -> frozenset[str]:
    """The regular `*.whl` files directly in `directory` (a symlink or anything else is not served)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return frozenset()
    return frozenset(
        entry.name
        for entry in entries
        if entry.name.endswith(".whl") and not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)
    )


def plain_address(text: str) -> str:
    """An IP address in one spelling: an IPv4-mapped IPv6 address (::ffff:10.0.0.5, a dual-stack socket's view of an
    IPv4 client) as the IPv4 address itself."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


class _Handler(BaseHTTPRequestHandler):
    server: WheelhouseHTTPServer
    server_version = "rocm-fleet-wheelhouse"
    sys_version = ""
    # StreamRequestHandler sets it on the connection: a request line, a header or sendfile waits at most this long.
    timeout = CONNECTION_TIMEOUT

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: pyinfra's output is the run's log

    def _answer(self, body: bool) -> None:
        match = _PATH.fullmatch(unquote(urlsplit(self.path).path))
        directory, names = self.server.wheel_set(match.group(1)) if match else (None, frozenset())
        if not names:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        set_name, file_name = match.group(1), match.group(2)
        if file_name == "":
            self._send_index(set_name, names, body)
        elif file_name in names:
            self._send_file(directory / file_name, body)
        else:
            self.send_error(HTTPStatus.NOT_FOUND)

    def _send_index(self, set_name: str, names: frozenset[str], body: bool) -> None:
        links = "".join(f'<a href="{quote(name)}">{html.escape(name)}</a><br>\n' for name in sorted(names))
        page = (
            f"<!DOCTYPE html>\n<html><head><title>{html.escape(set_name)}</title></head><body>\n{links}</body></html>\n"
        )
        data = page.encode()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _send_file(self, path: Path, body: bool) -> None:
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        with os.fdopen(descriptor, "rb") as opened:
            info = os.fstat(opened.fileno())
            if not stat.S_ISREG(info.st_mode):
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(info.st_size))
            self.end_headers()
            if body:
                sent = self.connection.sendfile(opened, 0, info.st_size)
                self.server.count(sent)


class WheelhouseHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        root: Path,
        address: str,
        port: int,
        flat_set: str | None = None,
        allow: frozenset[str] | None = None,
        timeout: float = CONNECTION_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ):
        """Serves the complete sets under `root`, or with `flat_set` the wheels directly in `root` as that set; with
        `allow`, to clients from those addresses only."""
        self.RequestHandlerClass = type("Handler", (_Handler,), {"timeout": timeout})
        self.root = root
        self.flat_set = flat_set
        self.flat_names = flat_wheel_names(root) if flat_set is not None else frozenset()
        self.allow = None if allow is None else frozenset(plain_address(a) for a in allow)
        self.bytes_sent = 0
        self.files_sent = 0
        self.refused: dict[str, int] = {}  # client address -> connections closed unanswered
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        if ":" in address:
            self.address_family = socket.AF_INET6
        super().__init__((address, port), self.RequestHandlerClass)

    def wheel_set(self, set_name: str) -> tuple[Path, frozenset[str]]:
        """The directory of the set `set_name` and its wheels (none: no such set)."""
        if self.flat_set is not None:
            return self.root, self.flat_names if set_name == self.flat_set else frozenset()
        return self.root / set_name, wheel_names(self.root, set_name)

    def get_request(self):
        # A slot first, then accept(): past MAX_CONNECTIONS the kernel holds new connections in the listen queue.
        self._slots.acquire()
        try:
            return super().get_request()
        except BaseException:
            self._slots.release()
            raise

    def verify_request(self, request, client_address) -> bool:
        client = plain_address(client_address[0])
        if self.allow is None or client in self.allow:
            return True
        with self._lock:
            self.refused[client] = self.refused.get(client, 0) + 1
        self._slots.release()  # closed unanswered: no thread will release it
        return False

    def process_request(self, request, client_address) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # its thread never started
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        pass  # a host that hung up mid-file, or timed out: its pip says so; nothing to print here

    def count(self, sent: int) -> None:
        with self._lock:
            self.bytes_sent += sent
            self.files_sent += 1


def summary(server: WheelhouseHTTPServer) -> str:
    """The server's last line: what it served, and whom it refused."""
    line = f"served {server.bytes_sent} bytes in {server.files_sent} files"
    if server.refused:
        who = ", ".join(f"{address} ({count})" for address, count in sorted(server.refused.items())[:10])
        more = f" and {len(server.refused) - 10} more" if len(server.refused) > 10 else ""
        line += f"; refused connections from {who}{more}: not an address of the fleet's hosts"
    return line


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wheelhouse_server.py")
    parser.add_argument("--flat", metavar="SET", help="serve the *.whl files of ROOT itself as the set SET")
    parser.add_argument("--allow", metavar="A,B", help="serve clients from these addresses only")
    parser.add_argument("--timeout", type=float, default=CONNECTION_TIMEOUT, help="seconds a connection may stall")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, help="served at once")
    parser.add_argument("root", type=Path)
    parser.add_argument("address")
    parser.add_argument("port", type=int)
    args = parser.parse_args(argv)
    allow = frozenset(a for a in args.allow.split(",") if a) if args.allow is not None else None
    try:
        server = WheelhouseHTTPServer(
            args.root, args.address, args.port, args.flat, allow, args.timeout, args.max_connections
        )
    except OSError as error:
        print(f"cannot listen on {args.address}:{args.port}: {error.strerror}", flush=True)
        return 1
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(f"{READY}{server.server_address[0]}:{server.server_address[1]}", flush=True)
    sys.stdin.buffer.read()  # until the controller closes the pipe (or dies)
    server.shutdown()
    server.server_close()
    print(summary(server), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
