"""localfleet/cli.py: `python -m localfleet up|down|status` as a user runs it, signals and kills included.

Each test uses its own cache directory (LOCALFLEET_CACHE) whose base/ points at the shared cached base root, so
`down --all` and the stale-state cases only ever see this test's fleets.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import localfleet.fleet as fleet_module
from localfleet import Fleet, interrupts
from localfleet.cli import main as cli_main
from localfleet.layout import REPO, Layout
from localfleet.release import release_tree

from ..support.fleet_checks import leftovers, mounts_inside, processes_inside
from ..support.signals import block_interrupts
from .conftest import needs_root

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def cache(tmp_path, base_root):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "base").symlink_to(base_root.parent)
    yield cache
    # A failing test can leave a fleet up (an `up` that ignored its signal finishes and stays): nothing may outlive it.
    release_tree(cache)


def cli(cache, *args, **kwargs):
    env = {**os.environ, "LOCALFLEET_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "localfleet", *args], capture_output=True, text=True, cwd=REPO, env=env, **kwargs
    )


def start_up(cache, name, *options, hosts=3, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "localfleet", "up", "--hosts", str(hosts), "--name", name, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "LOCALFLEET_CACHE": str(cache)},
        **kwargs,
    )


@pytest.fixture
def cli_in_this_process(cache, monkeypatch):
    """localfleet.cli.main run in the test's own process, so that a test can make a signal land at a chosen point. main
    installs its signal handlers and may block signals: pytest's handlers and mask are put back afterwards."""
    monkeypatch.setenv("LOCALFLEET_CACHE", str(cache))
    handlers = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield cli_main
    for s in interrupts.SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    while signal.sigtimedwait(interrupts.SIGNALS, 0):  # one left pending while blocked must not reach pytest
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for s, handler in handlers.items():
        signal.signal(s, handler)
    interrupts._unwinding.clear()


def wait_for_line(process, text):
    seen = []
    for line in process.stderr:
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"never saw {text!r}; stderr was: {''.join(seen)}")


def ports_of(lines):
    return [int(match.group(1)) for line in lines if (match := re.search(r" listens on 127\.0\.0\.1:(\d+)", line))]


# The two kinds of host `up` brings up: booted (the default) and chroots (--chroot); what status says of a running one.
KINDS = {"booted": ((), "booted"), "chroot": (("--chroot",), "sshd up")}


@pytest.mark.parametrize("kind", KINDS)
def test_up_status_down(cache, kind):
    options, running = KINDS[kind]
    up = cli(cache, "up", "--hosts", "2", "--name", "cli1", *options)
    assert up.returncode == 0, up.stderr
    inventory = Path(up.stdout.strip())  # stdout is just the inventory path
    assert inventory == cache / "fleets/cli1/inventory.py" and inventory.is_file()
    fleet = Fleet.attach("cli1", cache=cache)
    ports = [h.port for h in fleet.hosts]
    assert fleet.host("ws2").ssh(["uname", "-n"]).stdout == "ws2\n"  # outlives the `up` process

    status = cli(cache, "status")
    assert status.returncode == 0
    assert f"cli1: 2 {kind} host(s), login root, persistent (until `down`)" in status.stdout
    assert f"ws1  127.0.0.1:{ports[0]}  {running}" in status.stdout

    down = cli(cache, "down", "--name", "cli1")
    assert down.returncode == 0 and "fleet 'cli1': torn down" in down.stderr
    assert leftovers(cache, ports) == [] and not inventory.parent.exists()
    again = cli(cache, "down", "--name", "cli1")
    assert again.returncode == 0 and "nothing to tear down" in again.stderr
    assert cli(cache, "status").stdout == "no local fleets\n"
    assert list((cache / "fleets").iterdir()) == []  # the lock file goes with the fleet


def test_status_into_a_pipe_its_reader_closed_exits_0_without_a_traceback(cache):
    """`python -m localfleet status | head` once ended in a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before status writes its first line
    try:
        status = subprocess.run(
            [sys.executable, "-m", "localfleet", "status"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "LOCALFLEET_CACHE": str(cache)},
        )
    finally:
        os.close(write_end)
    assert (status.returncode, status.stderr) == (0, "")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_halfway_through_up_tears_down_and_exits_130_even_if_started_with_it_blocked(cache, sig, kind):
    up = start_up(cache, "sig", *KINDS[kind][0], preexec_fn=block_interrupts)
    lines = wait_for_line(up, "ws2 listens on")
    up.send_signal(sig)
    _, rest = up.communicate()
    assert up.returncode == 130, rest
    assert f"interrupted ({sig.name}); what was started has been torn down" in rest
    assert leftovers(cache, ports_of(lines)) == [] and not (cache / "fleets/sig").exists()


def test_a_second_signal_during_the_teardown_of_an_interrupted_up_does_not_break_into_it(cache):
    """The first signal unwinds `up`; one that lands while its teardown runs (localfleet/interrupts.py, shared with
    bin/demo) must neither stop that teardown halfway nor start a second one."""
    up = start_up(cache, "sig2")
    lines = wait_for_line(up, "ws2 listens on")
    up.send_signal(signal.SIGINT)
    lines += wait_for_line(up, "tearing down what was started")
    up.send_signal(signal.SIGTERM)
    _, rest = up.communicate()
    assert up.returncode == 130, rest
    assert "interrupted (SIGINT); what was started has been torn down" in rest
    assert leftovers(cache, ports_of(lines)) == [] and not (cache / "fleets/sig2").exists()


def test_a_killed_up_leaves_stale_state_that_status_names_and_down_removes(cache):
    up = start_up(cache, "stale")
    lines = wait_for_line(up, "ws2 listens on")
    up.kill()
    up.wait()
    fleet_dir = cache / "fleets/stale"
    assert processes_inside(fleet_dir) and mounts_inside(fleet_dir)  # SIGKILL: nothing could clean up
    status = cli(cache, "status")
    # (booted hosts are recorded as their containers start, all before the first boot is waited for)
    assert f"stale: 3 booted host(s), login root, owned by pid {up.pid} — gone: stale" in status.stdout, status.stdout
    down = cli(cache, "down", "--name", "stale")
    assert down.returncode == 0, down.stderr
    assert leftovers(cache, ports_of(lines)) == [] and not fleet_dir.exists()


OWNER = """
import sys
from localfleet import Fleet
with Fleet.up(n=1, name="owned") as fleet:
    print(fleet.hosts[0].port, flush=True)
    sys.stdin.read()  # until the test closes it (or kills this process)
"""


def test_down_all_removes_every_fleet_of_the_cache_but_one_a_live_process_owns_unless_forced(cache):
    ports = []
    for name in ("all1", "all2"):
        assert cli(cache, "up", "--hosts", "1", "--name", name).returncode == 0
        ports += [h.port for h in Fleet.attach(name, cache=cache).hosts]
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "LOCALFLEET_CACHE": str(cache)},
    )
    try:
        ports.append(int(owner.stdout.readline()))
        down = cli(cache, "down", "--all")
        assert down.returncode == 1 and down.stderr.count("torn down in") == 2
        assert f"fleet 'owned' belongs to running process {owner.pid}" in down.stderr
        assert processes_inside(cache / "fleets/owned")  # left alone
        assert cli(cache, "down", "--name", "owned", "--force").returncode == 0
        assert owner.poll() is None  # the owner itself was not touched, only its fleet
    finally:
        owner.kill()
        owner.wait()
    assert leftovers(cache, ports) == [] and list((cache / "fleets").iterdir()) == []


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs the system python3 (the test runs as nobody)")
def test_not_root_is_one_clear_line_and_bad_usage_is_exit_2(cache):
    for command in (["up"], ["down"]):
        # As nobody, with the system python3 (the venv's interpreter may sit in root's 0700 home); localfleet itself
        # needs only the standard library.
        done = subprocess.run(
            ["/usr/bin/python3", "-m", "localfleet", *command],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"LOCALFLEET_CACHE": str(cache), "PATH": os.environ["PATH"]},
            preexec_fn=lambda: (os.setgroups([]), os.setgid(65534), os.setuid(65534)),
        )
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("localfleet: must run as root"), done.stderr
    assert cli(cache, "up", "--hosts", "0").returncode == 2
    assert cli(cache, "down", "--name", "../x").returncode == 2
    assert not Layout(cache).fleets.exists() or list(Layout(cache).fleets.glob("*/")) == []


class _DropsWhatItsHandlerRaises:
    """Sends SIGTERM to this process from its __del__: the handler runs there, and Python drops what it raises
    ("Exception ignored in …") — as it does in at-fork hooks and finalizers, wherever a signal happens to land."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("kind", KINDS)
def test_a_signal_whose_exception_python_drops_still_unwinds_up(cache, cli_in_this_process, monkeypatch, kind):
    """Before: the dropped Interrupted counted as the one signal that unwinds, so `up` went on and exited 0 with the
    fleet up (seen under load with the drop in logging's at-fork hook, which signals_held now covers; but finalizers
    such as Popen.__del__, after every helper, remain). Dropped once the first host answers: its boot waited for, or
    its sshd started."""
    ports = []
    if kind == "booted":
        real_wait = Fleet._wait_for_boot

        def wait_then_drop_a_signal(self, host, fixed_port):
            real_wait(self, host, fixed_port)
            ports.append(self.host_state(host.name).port)
            _DropsWhatItsHandlerRaises()  # dropped at once

        monkeypatch.setattr(Fleet, "_wait_for_boot", wait_then_drop_a_signal)
    else:
        real_start = Fleet._start_first_sshd

        def start_then_drop_a_signal(self, root, name, port):
            started = real_start(self, root, name, port)
            ports.append(started[0])
            _DropsWhatItsHandlerRaises()
            return started

        monkeypatch.setattr(Fleet, "_start_first_sshd", start_then_drop_a_signal)
    assert cli_in_this_process(["up", "--hosts", "2", "--name", "dropped", *KINDS[kind][0]]) == 130
    assert len(ports) == 1  # unwound before the second host
    assert leftovers(cache, ports) == [] and not (cache / "fleets/dropped").exists()


def test_a_signal_that_lands_as_fleet_up_returns_still_tears_the_fleet_down(cache, cli_in_this_process, monkeypatch):
    """Here it lands as Fleet.up lets its lock go, after its own try: the exception reaches `up` before the fleet
    does. Before: exit 130 saying what was started had been torn down, with the fleet left up."""
    real_lock = fleet_module._fleet_lock
    landed = []

    @contextlib.contextmanager
    def lock_then_signal(layout, name, blocking=True):
        with real_lock(layout, name, blocking) as got:
            yield got
        if name == "late" and not landed:
            landed.append(name)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(fleet_module, "_fleet_lock", lock_then_signal)
    assert cli_in_this_process(["up", "--hosts", "1", "--name", "late"]) == 130
    assert landed and leftovers(cache) == [] and not (cache / "fleets/late").exists()
