"""localfleet/commands.py: failures become one line, and helpers die with a controller that is killed."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from localfleet.commands import run
from localfleet.errors import FleetError
from localfleet.layout import REPO
from localfleet.procs import start_time

from ..support.waiting import wait_for


def test_a_failing_command_is_one_line_with_what_was_done_its_last_line_and_the_fix():
    with pytest.raises(FleetError) as caught:
        run(
            ["sh", "-c", "echo noise >&2; echo 'cp: no space left' >&2; exit 3"],
            "copying X to Y",
            fix="free some space",
        )
    assert str(caught.value) == "copying X to Y failed (exit 3): cp: no space left — free some space"
    with pytest.raises(FleetError, match="^making keys: no-such-tool-xyz is not installed — apt-get install it$"):
        run(["no-such-tool-xyz"], "making keys", fix="apt-get install it")


def test_a_helper_dies_when_its_controller_is_killed():
    controller = subprocess.Popen(
        [sys.executable, "-c", "from localfleet.commands import run; run(['sleep', 'infinity'], 'sleeping')"], cwd=REPO
    )
    try:
        helper = int(
            wait_for(
                lambda: Path(f"/proc/{controller.pid}/task/{controller.pid}/children").read_text().split(),
                "the controller to start its helper",
            )[0]
        )
        controller.send_signal(signal.SIGKILL)
        controller.wait()
        # The kernel sends the helper its SIGKILL as the controller exits; it is gone (or a zombie) once it has run.
        wait_for(lambda: start_time(helper) is None, f"sleep {helper} to die with its killed controller")
    finally:
        controller.kill()
        controller.wait()


class Unwound(BaseException):
    """What the CLI's handlers raise on SIGINT/SIGTERM (interrupts.Interrupted), from a handler local to these tests."""


@pytest.fixture
def sigterm_unwinds():
    """SIGTERM raises Unwound in this process for the test (as `python -m localfleet` makes it raise Interrupted)."""

    def unwind(signum, frame):
        raise Unwound(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, unwind)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_signal_while_a_helper_is_being_started_stops_and_reaps_it_before_the_exception_goes_on(
    tmp_path, sigterm_unwinds
):
    """The child signals us from its preexec hook, i.e. while subprocess.Popen waits for its exec: an exception from
    there used to leave the helper running with nobody holding its pid — a `cp` of a host root went on writing into the
    fleet that the teardown was deleting ("could not delete …/fleets/sig: Directory not empty")."""
    pid_file = tmp_path / "helper.pid"

    def signal_the_controller_first():
        pid_file.write_text(str(os.getpid()))
        os.kill(os.getppid(), signal.SIGTERM)

    with pytest.raises(Unwound):
        run(["sleep", "infinity"], "sleeping", preexec_fn=signal_the_controller_first)
    helper = int(pid_file.read_text())
    try:
        assert start_time(helper) is None, f"helper {helper} still runs after run() gave up on it"
    finally:
        if start_time(helper) is not None:
            os.kill(helper, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(helper, 0)


_fork_hook_signals: list[int] = []  # armed by a test: the signal the hook below sends this process


def _signal_self_after_fork() -> None:
    if _fork_hook_signals:
        os.kill(os.getpid(), _fork_hook_signals.pop())


def test_a_signal_that_lands_while_a_helper_forks_is_not_lost(sigterm_unwinds):
    """Python runs at-fork hooks around every fork with a preexec_fn (logging's _releaseLock is one), and drops an
    exception raised in one ("Exception ignored in: <function _releaseLock>"): a SIGINT handled there vanished, and
    since only the first signal unwinds, `up` went on to bring the whole fleet up and exit 0."""
    if not getattr(test_a_signal_that_lands_while_a_helper_forks_is_not_lost, "hooked", False):
        os.register_at_fork(after_in_parent=_signal_self_after_fork)  # cannot be undone: inert unless armed
        test_a_signal_that_lands_while_a_helper_forks_is_not_lost.hooked = True
    _fork_hook_signals.append(signal.SIGTERM)
    try:
        with pytest.raises(Unwound):
            run(["true"], "doing nothing")
    finally:
        _fork_hook_signals.clear()
