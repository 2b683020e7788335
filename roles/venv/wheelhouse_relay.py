"""Relay mode of the wheelhouse (`wheelhouse_seed`, `wheelhouse_seed_serve`): the controller pushes the wheelhouse to
one host of the fleet, the seed, over SSH as in push mode; every other host pulls it from the seed over HTTP, checked
against the controller's hashes as in pull mode (roles/venv/wheelhouse_pull.py). The wheelhouse passes through the
controller once, whatever the fleet's size, and the seed — on the fleet's own network — sends it to the others.

The seed's server is roles/venv/wheelhouse_server.py in its `--flat` mode, given to the seed's system python3 on the
command line (`python3 -I -c SOURCE`): nothing is left on the seed to run later, and nothing it runs is a file any
account there could change. Where the SSH command runs as root, the server drops to `nobody` first (the wheelhouse is
world-readable), so a network-facing process on the seed is never root.

It lives exactly as long as it is needed, like the controller's own server:
- started by the first host that actually installs (a command of the install operation that runs on the controller
  at execution: `--dry` and a run with nothing to install start none), on a session of its own over the seed's SSH
  connection, once per run;
- stopped when that operation has ended on every host: the controller closes the session's standard input, the
  server's signal to stop (it then prints what it served); also when the run's last host disconnects, at the
  controller's exit, and when the SSH connection drops (sshd closes the pipe) — it never outlives the run.

The order matters: pyinfra runs one operation on every host before the next (its default), so the seed's upload has
ended before any host installs. With `--no-wait` it would not; the hosts would then fail with pip's one line.
"""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path

from pyinfra import logger
from pyinfra.api import FunctionCommand, StringCommand
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments
from pyinfra.connectors.util import make_unix_command, make_unix_command_for_host

from roles.venv import wheelhouse_server
from roles.venv.wheelhouse_pull import fleet_addresses, servers_of

SERVER_SOURCE = Path(wheelhouse_server.__file__).read_text()
# The arguments that shape a command line (sudo, su, env, shell …), of those pyinfra gives a host's commands.
_WRAPPING = frozenset(inspect.signature(make_unix_command).parameters) & frozenset(CONNECTOR_ARGUMENT_KEYS)
START_TIMEOUT = 60  # seconds for the seed's server to say it listens (python3's start and a bind)


def seed_server_command(
    directory: str, set_name: str, address: str, port: int, allow: frozenset[str] | None = None
) -> str:
    """The shell command, on the seed, that serves the wheels of `directory` as `set_name` until its stdin closes
    (with `allow`, to clients from those addresses only)."""
    allowed = f"--allow {shlex.quote(','.join(sorted(allow)))} " if allow is not None else ""
    serve = (
        f"python3 -I -c {shlex.quote(SERVER_SOURCE)} {allowed}--flat {shlex.quote(set_name)} "
        f"{shlex.quote(directory)} {shlex.quote(address)} {int(port)}"
    )
    # nobody's own group, whatever the distribution calls it (nogroup on Debian and Ubuntu).
    as_nobody = f'setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --reset-env -- {serve}'
    return f'cd / && if [ "$(id -u)" = 0 ]; then exec {as_nobody}; else exec {serve}; fi'


class SeedServer:
    """The seed's server for one run: a session on the seed host's SSH connection (see the module docstring)."""

    def __init__(self, state, seed: str, address: str, port: int, directory: str, set_name: str):
        self.state, self.seed = state, seed
        self.label = f"wheelhouse_seed {seed} ({address}:{port})"  # in the run's log, with what it served
        self.command = seed_server_command(directory, set_name, address, port, fleet_addresses(state, address))
        self.channel = None
        self.out = None  # the channel's standard output, read through one buffer
        self.failure: str | None = None
        self.served: str | None = None  # its last line: "served BYTES bytes in N files"

    def start(self) -> str | None:
        """Start it and wait until it listens; None, or why it could not (one line)."""
        seed = self.state.inventory.get_host(self.seed, None)
        if seed is None or seed not in self.state.inventory.get_active_hosts():
            self.failure = "the seed is not in this run, or failed before it could serve"
            return self.failure
        try:
            # As pyinfra runs the seed's own commands: its login, and sudo (or su, doas) as its data says.
            global_arguments, _ = pop_global_arguments(self.state, seed, {})
            command = make_unix_command_for_host(
                self.state,
                seed,
                StringCommand(self.command),
                **{key: global_arguments[key] for key in _WRAPPING if key in global_arguments},
            )
            self.channel = seed.connector.client.get_transport().open_session(timeout=START_TIMEOUT)
            self.channel.settimeout(START_TIMEOUT)
            self.channel.exec_command(command.get_raw_value())
            self.out = self.channel.makefile("rb")
            first = self.out.readline().decode(errors="replace").strip()
        except Exception as error:  # noqa: BLE001 - paramiko's, a socket's or a timeout: all one line
            first = f"{type(error).__name__}: {error}"
        if not first.startswith(wheelhouse_server.READY):
            why = first or self._stderr_tail() or "the server exited before it listened"
            self.stop()
            self.failure = why
            return why
        return None

    def _stderr_tail(self) -> str:
        try:
            lines = [
                line
                for line in self.channel.makefile_stderr("r").read(65536).decode(errors="replace").splitlines()
                if line.strip()
            ]
        except Exception:  # noqa: BLE001
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self) -> None:
        channel, self.channel = self.channel, None
        if channel is None:
            return
        try:
            channel.shutdown_write()  # the server's standard input ends: its signal to stop
            lines = [line for line in self.out.read(65536).decode(errors="replace").splitlines() if line.strip()]
            self.served = lines[-1] if lines else None
        except Exception:  # noqa: BLE001 - a seed whose connection is gone: its sshd has closed the pipe already
            pass
        finally:
            channel.close()


def relay_failure_line(host_name: str, seed: str, address: str, port: int, why: str) -> str:
    return (
        f"{host_name}: wheelhouse_seed {seed}: it cannot serve the wheelhouse at {address}:{port} ({why}) — run "
        "the seed in the same run, and give wheelhouse_seed_serve a free port on an address of the seed that the "
        "other hosts reach"
    )


def _relay(state, host, seed: str, address: str, port: int, directory: str, set_name: str) -> bool:
    server = servers_of(state).ensure(
        ("seed", seed, address, port),
        lambda: SeedServer(state, seed, address, port, directory, set_name),
        until_end_of=host.executing_op_hash,
    )
    if server.failure is not None:
        host.log_styled(
            relay_failure_line(host.name, seed, address, port, server.failure), fg="red", log_func=logger.error
        )
        return False
    return True


def relay_command(seed: str, address: str, port: int, directory: str, set_name: str) -> FunctionCommand:
    """A command, run on the controller at execution, that makes sure the seed's server of this run is listening
    (the arguments in the order of venv_packages' `relay`)."""
    return FunctionCommand(_relay, (seed, address, port, directory, set_name), {})
