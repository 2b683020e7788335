"""Pull mode for real (issue 12, part 5): tasks/venv.py over SSH on local Debian 12 workstations (localfleet, admin
login with sudo, the venv owned by a workstation user), the hosts downloading the offline wheelhouse over HTTP instead
of the controller uploading it — from the controller's own short-lived server (`wheelhouse_serve`), and from another
plain HTTP server (`wheelhouse_url`, Python's http.server) that serves a tampered wheel: pip refuses it by the
controller's hash and the host fails with one line, nothing installed."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from packaging.utils import parse_wheel_filename

from localfleet.ports import free_port, is_listening
from roles.uploads import SHA256_RECORD
from roles.venv.wheelhouse_pull import hash_mismatch_line
from tests.support.fleet_deploy import deploy, host_lines

pytestmark = [pytest.mark.slow, pytest.mark.root]

VENV = "/opt/rocm-fleet/venv"
HOST_WHEELHOUSE = "/var/cache/rocm-fleet/wheelhouse"
SET = "cp311-manylinux_2_36_x86_64"
IMPORT = "import torch, bitsandbytes; print(torch.__version__, bitsandbytes.__version__)"


def _with_alice(fleet):
    for host in fleet.hosts:
        host.run(["useradd", "--create-home", "alice"])


def _wheelhouse_files(host) -> list[str]:
    return sorted(path.name for path in (host.root / HOST_WHEELHOUSE.lstrip("/")).iterdir())


def test_hosts_pull_the_wheelhouse_from_the_controllers_server_for_the_run_only():
    from localfleet.fleet import Fleet

    port = free_port()
    with Fleet.up(n=2, login="admin", data={"venv_owner": "alice", "wheelhouse_serve": f"127.0.0.1:{port}"}) as fleet:
        _with_alice(fleet)
        run = deploy(fleet.inventory, "tasks/venv.py")
        assert run.returncode == 0, run.explain()
        assert f"Venv | Wheelhouse {SET}: hashes (wheels pulled from http://127.0.0.1:{port}/{SET}/)" in (
            run.changed_operations
        ), run.explain()
        for host in fleet.hosts:
            assert host.run([f"{VENV}/bin/python", "-c", IMPORT]).stdout.split() == ["2.13.0+cpu", "0.50.1"]
            # Pulled, not pushed: only the hashes reached the host over SSH (and the upload's own record of them).
            assert _wheelhouse_files(host) == sorted([SHA256_RECORD, "requirements.txt"]), host.name
        assert not is_listening(port), "the controller's wheelhouse server outlived the run"

        again = deploy(fleet.inventory, "tasks/venv.py")
        assert again.returncode == 0 and again.changed_operations == [], again.explain()
        assert not is_listening(port)


def test_a_server_that_serves_a_tampered_wheel_is_refused_by_hash_with_one_line(tmp_path):
    """Any HTTP server will do (here Python's http.server over a copy of the controller's wheelhouse) — and what it
    serves is installed only with the controller's hashes: one wheel changed there, and pip refuses the whole set."""
    from localfleet.fleet import Fleet
    from localfleet.layout import Layout

    mirror = tmp_path / "mirror"
    port = free_port()
    with Fleet.up(
        n=1, login="admin", data={"venv_owner": "alice", "wheelhouse_url": f"http://127.0.0.1:{port}"}
    ) as fleet:
        _with_alice(fleet)
        # The controller prepares its wheelhouse while planning; a dry run is enough to have it (nothing changes).
        assert deploy(fleet.inventory, "tasks/venv.py", dry=True).returncode == 0
        shutil.copytree(Layout.default().wheelhouse / SET, mirror / SET)
        [tampered] = sorted((mirror / SET).glob("typing_extensions-*.whl"))
        tampered.write_bytes(tampered.read_bytes() + b"\0")  # one byte more: another sha256
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", str(mirror)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not is_listening(port):
                assert server.poll() is None, "http.server did not start"
            run = deploy(fleet.inventory, "tasks/venv.py")
            assert run.returncode == 1, run.explain()
            find_links = f"http://127.0.0.1:{port}/{SET}/"
            errors = [line for line in host_lines(run.log, "ws1") if line.startswith("rocm-fleet:")]
            version = parse_wheel_filename(tampered.name)[1]
            wheel = f"typing-extensions=={version} from {find_links}{tampered.name}"
            assert errors == [hash_mismatch_line(find_links, wheel)], run.explain()
            host = fleet.host("ws1")
            nothing = host.run([f"{VENV}/bin/python", "-c", "import torch"], check=False)
            assert nothing.returncode != 0, "torch was installed although a wheel of the set failed its hash"

            # The same server with the controller's files: the same hosts install from it.
            shutil.copyfile(Layout.default().wheelhouse / SET / tampered.name, tampered)
            run = deploy(fleet.inventory, "tasks/venv.py")
            assert run.returncode == 0, run.explain()
            assert host.run([f"{VENV}/bin/python", "-c", IMPORT]).stdout.split() == ["2.13.0+cpu", "0.50.1"]
        finally:
            server.terminate()
            server.wait()
