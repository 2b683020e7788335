"""localfleet/ports.py: a loopback port held by another program is seen as the kernel sees it."""

import socket

from localfleet.ports import LOOPBACK, bound_elsewhere, free_port, is_listening


def test_a_port_held_by_another_socket_is_bound_elsewhere_listening_or_not():
    for listen in (True, False):
        with socket.socket() as squatter:
            squatter.bind((LOOPBACK, 0))
            if listen:
                squatter.listen()
            port = squatter.getsockname()[1]
            assert bound_elsewhere(port) and is_listening(port) == listen
        assert not bound_elsewhere(port)  # let go: free again


def test_a_connection_left_in_time_wait_does_not_hold_the_port():
    """sshd binds with SO_REUSEADDR: the client side of a closed connection does not keep it from its port."""
    port = free_port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LOOPBACK, port))
        server.listen()
        with socket.create_connection((LOOPBACK, port)):
            accepted, _ = server.accept()
            accepted.close()  # the server side closes first: its end waits in TIME_WAIT on `port`
    assert not bound_elsewhere(port)
