"""localfleet/procs.py: finding processes by their root directory and stopping them, on real processes."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import localfleet.procs as procs
from localfleet.errors import FleetError
from localfleet.procs import ProcessId, processes_rooted_under, start_time, stop_processes, stop_processes_rooted_under

from ..support.waiting import wait_for
from .conftest import chrooted_python, needs_root

pytestmark = [needs_root, pytest.mark.root]


def ignores_sigterm(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    return bool(ignored & (1 << (signal.SIGTERM - 1)))


def test_a_chrooted_process_is_found_by_its_root_and_a_sibling_prefix_is_not(tmp_path):
    tree, sibling = tmp_path / "tree", tmp_path / "tree2"
    (tree / "sub").mkdir(parents=True)
    sibling.mkdir()
    inside = chrooted_python(tree / "sub", "print('in', flush=True); signal.pause()")
    next_door = chrooted_python(sibling, "print('in', flush=True); signal.pause()")
    try:
        assert inside.stdout.readline() == next_door.stdout.readline() == "in\n"
        assert processes_rooted_under(tree) == [inside.pid]
        assert stop_processes_rooted_under(tree) == []
        assert start_time(inside.pid) is None  # gone (and reaped: stop_processes reaps its own children)
        assert next_door.poll() is None  # untouched
    finally:
        for p in (inside, next_door):
            p.kill()
            p.wait()


def test_a_process_ignoring_sigterm_gets_sigkill(tmp_path):
    stubborn = chrooted_python(
        tmp_path, "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('in', flush=True); signal.pause()"
    )
    try:
        assert stubborn.stdout.readline() == "in\n"
        assert ignores_sigterm(stubborn.pid)  # read from the kernel, not timed
        assert stop_processes([stubborn.pid], grace_s=0.3) == []
        assert start_time(stubborn.pid) is None
    finally:
        stubborn.kill()
        stubborn.wait()


def test_process_id_tells_a_recycled_pid_from_the_original():
    child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    ident = ProcessId.of(child.pid)
    assert ident.alive() and ident.start == start_time(child.pid)
    assert not ProcessId(child.pid, ident.start + 1).alive()  # same pid, different start: another process
    child.kill()
    child.wait()
    assert not ident.alive() and start_time(child.pid) is None
    assert ProcessId.from_json(ident.to_json()) == ident


def test_a_zombie_counts_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    assert start_time(child.pid) is None
    child.wait()


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@pytest.mark.skipif(not Path("/dev/loop-control").exists(), reason="needs loop devices (a frozen filesystem)")
def test_a_process_stuck_in_the_kernel_after_sigkill_is_named_not_waited_for_again(tmp_path, monkeypatch):
    """A write to a frozen filesystem (fsfreeze) keeps a process in D state, SIGKILL or not, until the thaw: the one
    case where stopping it ends in an error naming it rather than in more waiting (the cap, 600 s, is 1 s here)."""
    monkeypatch.setattr(procs, "KILL_CAP_S", 1.0)
    tree, image = tmp_path / "tree", tmp_path / "ext4.img"
    data = tree / "data"
    data.mkdir(parents=True)
    subprocess.run(["truncate", "-s", "16M", image], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, data], check=True)
    try:
        subprocess.run(["fsfreeze", "--freeze", data], check=True)
        try:
            writer = chrooted_python(tree, "print('in', flush=True); open('/data/x', 'w')")
            assert writer.stdout.readline() == "in\n"
            wait_for(lambda: _state(writer.pid) == "D", "the writer to block on the frozen filesystem")
            with pytest.raises(
                FleetError, match=rf"processes \[{writer.pid}\] rooted in .* still there 1 s after SIGKILL"
            ):
                stop_processes_rooted_under(tree, grace_s=0.1)
        finally:
            subprocess.run(["fsfreeze", "--unfreeze", data], check=True)
        assert writer.wait() < 0  # and it dies of our signals once the kernel lets it go
    finally:
        subprocess.run(["umount", data], check=True)
