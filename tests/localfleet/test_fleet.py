"""localfleet/fleet.py: a whole fleet over real SSH with real pyinfra, and teardown after success, failure and kills.

"Nothing left" is judged by tests/support/fleet_checks.py, which reads mountinfo, /proc/PID/root and the ports
directly rather than through localfleet's own code.
"""

import json
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import localfleet.fleet as fleet_module
from localfleet import Fleet, FleetError
from localfleet.layout import Layout
from localfleet.ports import free_port

from ..support.fleet_checks import booted_hosts, booted_leftovers, leftovers, mounts_inside, processes_inside
from ..support.waiting import blocked_on_flock, wait_for
from .conftest import real_fleet

PYINFRA = str(Path(sys.executable).with_name("pyinfra"))

# A process that owns a fleet (as a test session does), prints its ports once it is up, and keeps it until its stdin
# closes (the test ends it) or a signal unwinds it. Ctrl-C raises KeyboardInterrupt in it as in a terminal, also when
# the test runner was started with SIGINT ignored (a background job: children inherit that).
OWNER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from localfleet import Fleet
with Fleet.up(n=1, name=sys.argv[1]) as fleet:
    print(" ".join(str(h.port) for h in fleet.hosts), flush=True)
    sys.stdin.read()
"""


def pyinfra(inventory, *args):
    return subprocess.run([PYINFRA, str(inventory), *args], capture_output=True, text=True)


def start_owner(name):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(fleet_module.__file__).parents[1],
    )
    ports = [int(p) for p in owner.stdout.readline().split()]
    assert ports, "the owner process did not bring its fleet up"
    return owner, ports


def test_a_waiter_on_a_lock_file_deleted_by_down_still_excludes_everyone_else(tmp_path):
    """fleet._fleet_lock's inode check, with threads standing in for processes (flock is per open file).

    The waiter blocks on the lock file; the holder deletes it (as down does) and lets go. A waiter that kept the lock
    on the deleted file would share the fleet with the next process, which locks a new file at the same path.
    """
    layout = Layout(tmp_path)
    seen = []

    def waiter():
        with fleet_module._fleet_lock(layout, "f1") as got:
            with fleet_module._fleet_lock(layout, "f1", blocking=False) as someone_else_got:
                seen.append((got, someone_else_got))

    with fleet_module._fleet_lock(layout, "f1"):
        thread = threading.Thread(target=waiter)
        thread.start()
        wait_for(lambda: blocked_on_flock(layout.fleet_lock("f1")), "the waiter to block on the lock file")
        fleet_module._drop_fleet_lock(layout, "f1")  # what down does, lock held
    thread.join()
    assert seen == [(True, False)]


@real_fleet
def test_up_then_pyinfra_over_ssh_on_every_host_then_down_leaves_nothing(tmp_path):
    fleet = Fleet.up(n=3, data={"reports_dir": str(tmp_path / "reports")})
    fleet_dir, ports = fleet.directory, [h.port for h in fleet.hosts]
    try:
        assert [h.name for h in fleet.hosts] == ["ws1", "ws2", "ws3"] and len(set(ports)) == 3
        assert fleet.inventory.is_file() and f"'reports_dir': '{tmp_path / 'reports'}'" in fleet.inventory.read_text()

        done = pyinfra(fleet.inventory, "exec", "-y", "--", "uname", "-n")
        assert done.returncode == 0, done.stderr
        for name in ("ws1", "ws2", "ws3"):  # each host answers with its own name: three sshds, three roots
            assert re.search(rf"^\[{name}\] {name}$", done.stdout + done.stderr, re.M), done.stdout + done.stderr

        results = []
        for _ in range(2):
            done = pyinfra(fleet.inventory, "files.line", "path=/etc/localfleet-smoke", "line=smoke=1", "-y", "--json")
            assert done.returncode == 0, done.stderr
            (operation,) = json.loads(done.stdout)["results"]["operations"]
            results.append(operation)
        assert sorted(results[0]["success"]) == ["ws1", "ws2", "ws3"] and results[0]["no_change"] == []
        assert sorted(results[1]["no_change"]) == ["ws1", "ws2", "ws3"] and results[1]["success"] == []
        assert fleet.host("ws2").run(["cat", "/etc/localfleet-smoke"]).stdout == "smoke=1\n"
        assert leftovers(fleet_dir, ports) != []  # the checker does see a running fleet
    finally:
        fleet.down()
    assert leftovers(fleet_dir, ports) == []
    assert not fleet_dir.exists()
    assert Path(fleet.layout.bases).is_dir()  # the base stays cached


@real_fleet
def test_admin_login_reaches_root_through_sudo_like_a_real_fleet(tmp_path):
    with Fleet.up(n=1, login="admin") as fleet:
        done = pyinfra(fleet.inventory, "exec", "-y", "--", "id", "-un")
        assert done.returncode == 0, done.stderr
        assert re.search(r"^\[ws1\] root$", done.stdout + done.stderr, re.M)  # sudo from the admin login
        assert fleet.host("ws1").ssh(["id", "-un"]).stdout == "admin\n"
        assert "'_sudo': True" in fleet.inventory.read_text()


@real_fleet
@pytest.mark.parametrize("boot", [True, False], ids=["booted", "chroot"])
def test_a_port_already_taken_at_the_third_host_fails_up_and_leaves_nothing(boot):
    name = f"taken-{free_port()}"
    fleet_dir = Layout.default().fleet_dir(name)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = [free_port(), free_port(), taken]
        with pytest.raises(FleetError, match=f"ws3: port {taken} on 127.0.0.1 is taken by another program"):
            Fleet.up(n=3, name=name, ports=ports, boot=boot)
        assert leftovers(fleet_dir, ports[:2]) == [] and not fleet_dir.exists()


def _booting(fleet_dir, count):
    """The fleet's booted hosts once `count` of them run systemd-nspawn (their launchers start it), else None."""
    hosts = booted_hosts(fleet_dir)
    return hosts if len(hosts) == count else None


@real_fleet
def test_ctrl_c_after_the_second_host_leaves_nothing(monkeypatch):
    """Ctrl-C is simulated by raising KeyboardInterrupt where a real one would land: as ws3's container is started,
    with ws1's and ws2's started and booting (tests/localfleet/test_boot.py has one while a host boots)."""
    real_start = fleet_module.Fleet._start_container
    started = []

    def start_then_interrupt(self, root, name, port, host_key):
        if name == "ws3":
            started.extend(wait_for(lambda: _booting(self.directory, 2), "systemd-nspawn to run for ws1 and ws2"))
            raise KeyboardInterrupt
        real_start(self, root, name, port, host_key)

    monkeypatch.setattr(fleet_module.Fleet, "_start_container", start_then_interrupt)
    name = f"ctrlc-{free_port()}"
    with pytest.raises(KeyboardInterrupt):
        Fleet.up(n=3, name=name)
    assert len(started) == 2 and booted_leftovers(started) == []
    assert leftovers(Layout.default().fleet_dir(name)) == []


@real_fleet
def test_ctrl_c_after_the_second_chroot_host_leaves_nothing(monkeypatch):
    """The same in a fleet of chroots (boot=False), whose hosts start one after the other: while ws3's sshd starts."""
    started = []
    real_start = fleet_module.Fleet._start_first_sshd

    def start_then_interrupt(self, root, name, port):
        if name == "ws3":
            raise KeyboardInterrupt
        started.append(real_start(self, root, name, port))
        return started[-1]

    monkeypatch.setattr(fleet_module.Fleet, "_start_first_sshd", start_then_interrupt)
    name = f"ctrlc-{free_port()}"
    with pytest.raises(KeyboardInterrupt):
        Fleet.up(n=3, name=name, boot=False)
    assert len(started) == 2
    assert leftovers(Layout.default().fleet_dir(name), [port for port, _ in started]) == []


@real_fleet
def test_an_exception_inside_the_with_block_tears_the_fleet_down():
    with pytest.raises(ZeroDivisionError):
        with Fleet.up(n=1) as fleet:
            fleet_dir, port = fleet.directory, fleet.hosts[0].port
            _ = 1 / 0
    assert leftovers(fleet_dir, [port]) == [] and not fleet_dir.exists()


@real_fleet
def test_a_name_in_use_by_a_live_owner_is_refused_and_ctrl_c_in_the_owner_tears_down():
    name = f"owned-{free_port()}"
    owner, ports = start_owner(name)
    fleet_dir = Layout.default().fleet_dir(name)
    try:
        with pytest.raises(
            FleetError, match=f"fleet '{name}' belongs to running process {owner.pid}, .* choose another name"
        ):
            Fleet.up(n=1, name=name)
        assert processes_inside(fleet_dir)  # refused without touching it
        owner.send_signal(signal.SIGINT)
        owner.wait()  # its teardown, however long the machine makes it
    finally:
        owner.kill()
        owner.wait()
    assert leftovers(fleet_dir, ports) == [] and not fleet_dir.exists()


@real_fleet
def test_a_fleet_whose_owner_was_killed_is_swept_by_the_next_up():
    name = f"killed-{free_port()}"
    owner, ports = start_owner(name)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    fleet_dir = Layout.default().fleet_dir(name)
    assert processes_inside(fleet_dir) and mounts_inside(fleet_dir)  # a killed owner cleans nothing itself
    with Fleet.up(n=1) as other:
        assert other.name != name
        assert leftovers(fleet_dir, ports) == [] and not fleet_dir.exists()
