"""localfleet/sshd.py: a host's sshd on a loopback port — up, own host name, port already taken, stopped."""

import os
import socket

import pytest

from localfleet.hostroot import mount_kernel_filesystems, personalize
from localfleet.ports import free_port, ssh_banner
from localfleet.release import release_tree
from localfleet.sshd import PortTaken, start_sshd, stop_sshd

from ..support.fleet_checks import listening, processes_inside
from ..support.waiting import wait_for
from .conftest import needs_root

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def ready_root(host_copy):
    personalize(host_copy, "ws5", "ssh-ed25519 AAAAunused test")
    mount_kernel_filesystems(host_copy)
    yield host_copy
    release_tree(host_copy)


def test_sshd_listens_in_the_root_and_stops(ready_root, tmp_path):
    port = free_port()
    process, ident = start_sshd(ready_root, "ws5", port, tmp_path / "sshd.log")
    try:
        assert ssh_banner(port).startswith("SSH-2.0-OpenSSH_9.2")  # Debian 12's sshd, from the root
        assert ident.pid == process.pid and ident.alive()
        assert any(line.startswith(f"{process.pid} (sshd") for line in processes_inside(ready_root))
        assert os.readlink(f"/proc/{process.pid}/ns/uts") != os.readlink("/proc/self/ns/uts")  # its own host name
        assert f"Server listening on 127.0.0.1 port {port}." in (tmp_path / "sshd.log").read_text()
    finally:
        stop_sshd(ident)
    assert listening([port]) == [] and not ident.alive()
    # The banner's connection had its own sshd child; its client has gone, so it ends by itself — on a loaded
    # machine not always before this line (the full suite under load once found it still there).
    wait_for(lambda: processes_inside(ready_root) == [], "the banner connection's sshd child to end")


def test_a_taken_port_is_reported_as_such(ready_root, tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(
            PortTaken,
            match=f"sshd of ws5 on 127.0.0.1:{port} exited .*"
            f"Bind to port {port} on 127.0.0.1 failed: Address already in use",
        ):
            start_sshd(ready_root, "ws5", port, tmp_path / "sshd.log")
    assert processes_inside(ready_root) == []
