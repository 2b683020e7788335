"""Starting a program the way some CI runners and service managers do: with SIGINT and SIGTERM blocked."""

import signal


def block_interrupts() -> None:
    """preexec_fn: the child starts with SIGINT and SIGTERM blocked. A signal mask survives exec, so a program that
    only installs handlers is deaf to `timeout`, `systemctl stop` and Ctrl-C there; ours must unblock them.
    (This is how the demo's SIGTERM test failed in CI: the whole deploy ran on and bin/demo exited 0.)"""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
