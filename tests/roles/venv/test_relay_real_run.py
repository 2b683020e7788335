"""Relay mode for real (issue 12, part 5): tasks/venv.py over SSH on two local Debian 12 workstations (localfleet,
admin login with sudo, the venv owned by a workstation user). The controller pushes the offline wheelhouse to the seed
alone; the seed serves it (roles/venv/wheelhouse_relay.py) and the other host pulls it from there, checked against
the controller's hashes — so the wheels pass through the controller once, not once per host. (Two hosts, not more:
each further one is another torch install, about half a minute of the suite, and proves nothing the second does not.)"""

from __future__ import annotations

import re
import socket
import subprocess

import pytest

from localfleet.layout import Layout
from localfleet.ports import free_port, is_listening
from roles.uploads import SHA256_RECORD
from roles.venv.wheelhouse import wheelhouse_files
from roles.venv.wheelhouse_relay import relay_failure_line
from tests.support.fleet_deploy import deploy, host_lines, operation_names

pytestmark = [pytest.mark.slow, pytest.mark.root]

VENV = "/opt/rocm-fleet/venv"
HOST_WHEELHOUSE = "/var/cache/rocm-fleet/wheelhouse"
SET = "cp311-manylinux_2_36_x86_64"
IMPORT = "import torch, bitsandbytes; print(torch.__version__, bitsandbytes.__version__)"


def _files(host) -> list[str]:
    return sorted(path.name for path in (host.root / HOST_WHEELHOUSE.lstrip("/")).iterdir())


def _seed_servers() -> list[str]:
    """Seed servers still running anywhere on this machine (the fleet's hosts share its process table)."""
    found = subprocess.run(["pgrep", "-af", f"--flat {HOST_WHEELHOUSE} "], capture_output=True, text=True)
    return found.stdout.splitlines()


def test_the_seed_gets_the_wheelhouse_once_and_the_others_pull_it_from_the_seed_for_the_run_only():
    from localfleet.fleet import Fleet

    port = free_port()
    with Fleet.up(
        n=2,
        login="admin",
        data={"venv_owner": "alice", "wheelhouse_seed": "ws1", "wheelhouse_seed_serve": f"127.0.0.1:{port}"},
    ) as fleet:
        for host in fleet.hosts:
            host.run(["useradd", "--create-home", "alice"])
        run = deploy(fleet.inventory, "tasks/venv.py")
        assert run.returncode == 0, run.explain()
        # One operation for both hosts, named by each host's part of it: pushed to ws1, pulled by ws2.
        assert operation_names(run.log, f"Venv | Wheelhouse {SET}") == {
            f"Venv | Wheelhouse {SET}",
            f"Venv | Wheelhouse {SET}: hashes (wheels pulled from http://127.0.0.1:{port}/{SET}/)",
        }, run.explain()

        controller_set = wheelhouse_files(Layout.default().wheelhouse / SET)
        wheels = {name for name in controller_set if name.endswith(".whl")}
        # Pushed to the seed alone; ws2 got the hashes only, and pulled the wheels from the seed.
        assert _files(fleet.host("ws1")) == sorted([*controller_set, SHA256_RECORD])
        assert _files(fleet.host("ws2")) == sorted([SHA256_RECORD, "requirements.txt"])
        for host in fleet.hosts:
            assert host.run([f"{VENV}/bin/python", "-c", IMPORT]).stdout.split() == ["2.13.0+cpu", "0.50.1"]

        # The seed's server said what it sent: every wheel to ws2, once (none to itself).
        size = sum((Layout.default().wheelhouse / SET / name).stat().st_size for name in wheels)
        served = re.findall(r"wheelhouse_seed ws1 \(127\.0\.0\.1:\d+\): served (\d+) bytes in (\d+) files", run.log)
        assert served == [(str(size), str(len(wheels)))], run.explain()
        assert not is_listening(port), "the seed's wheelhouse server outlived the run"
        assert _seed_servers() == []

        again = deploy(fleet.inventory, "tasks/venv.py")
        assert again.returncode == 0 and again.changed_operations == [], again.explain()
        assert "wheelhouse_seed ws1" not in again.log  # nothing to install: no server started
        assert not is_listening(port)

        # A seed that cannot serve (its port taken): the host that needs the wheels fails with one line naming the
        # seed, the address and the fix; the seed, with nothing to install, is not touched.
        fleet.host("ws2").run(["rm", "-rf", VENV])
        with socket.socket() as taken:
            # SO_REUSEADDR: the seed's connections of the first run may still hold the port in TIME_WAIT; a second
            # listener is refused all the same (Python's HTTP server sets it too: its bind still fails).
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("127.0.0.1", port))
            taken.listen()
            failed = deploy(fleet.inventory, "tasks/venv.py")
        assert failed.returncode == 1, failed.explain()
        why = f"cannot listen on 127.0.0.1:{port}: Address already in use"
        assert [line for line in host_lines(failed.log, "ws2") if "wheelhouse_seed" in line] == [
            relay_failure_line("ws2", "ws1", "127.0.0.1", port, why)
        ], failed.explain()
        assert "[ws1] Success" not in failed.log, failed.explain()
        assert "Traceback" not in failed.log, failed.explain()
        assert _seed_servers() == []
