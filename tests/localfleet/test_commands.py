"""localfleet/commands.py: failures become one line, and helpers die with a controller that is killed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localfleet.commands import run
from localfleet.errors import FleetError
from localfleet.layout import REPO


def test_a_failing_command_is_one_line_with_what_was_done_its_last_line_and_the_fix():
    with pytest.raises(FleetError) as caught:
        run(["sh", "-c", "echo noise >&2; echo 'cp: no space left' >&2; exit 3"], "copying X to Y", fix="free some space")
    assert str(caught.value) == "copying X to Y failed (exit 3): cp: no space left — free some space"
    with pytest.raises(FleetError, match="^making keys: no-such-tool-xyz is not installed — apt-get install it$"):
        run(["no-such-tool-xyz"], "making keys", fix="apt-get install it")


def test_a_helper_dies_when_its_controller_is_killed():
    controller = subprocess.Popen(
        [sys.executable, "-c", "from localfleet.commands import run; run(['sleep', '300'], 'sleeping')"], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        helper = None
        while helper is None and time.monotonic() < deadline:
            children = Path(f"/proc/{controller.pid}/task/{controller.pid}/children").read_text().split()
            helper = int(children[0]) if children else None
            time.sleep(0.05)
        assert helper is not None
        controller.send_signal(signal.SIGKILL)
        controller.wait()
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{helper}") and time.monotonic() < deadline:
            time.sleep(0.05)
        status = Path(f"/proc/{helper}/stat").read_text().split()[2] if os.path.exists(f"/proc/{helper}") else "gone"
        assert status in ("gone", "Z"), f"sleep {helper} outlived its killed controller (state {status})"
    finally:
        controller.kill()
        controller.wait()
