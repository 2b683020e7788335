"""stdin/stdout <-> a TCP port on 127.0.0.1: an SSH ProxyCommand that carries a host name that does not exist to a
local test workstation's sshd.

    ProxyCommand /path/to/python /path/to/tcp_relay.py PORT

SSH still checks the host key under the name it was given (known_hosts), so a test decides which key answers for
which name. Standard library only: it runs as its own process, started by paramiko.
"""

import os
import socket
import sys
import threading


def main(port: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port))

    def upstream() -> None:
        try:
            while chunk := os.read(0, 65536):
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server went first: read on, so that the process lives as long as its client wants it
            while os.read(0, 65536):
                pass

    client = threading.Thread(target=upstream, daemon=True)
    client.start()
    while chunk := sock.recv(65536):
        os.write(1, chunk)
    # Stay until the client closes our stdin (or paramiko, closing, sends SIGTERM): paramiko's ProxyCommand.close
    # kills the process by pid, and raises ProcessLookupError in its transport thread (a Traceback in pyinfra's
    # output) when the relay had already ended and been reaped after the server closed the connection.
    client.join()


if __name__ == "__main__":
    main(int(sys.argv[1]))
