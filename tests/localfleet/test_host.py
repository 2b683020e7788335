"""localfleet/host.py: what tests do with one host — run inside it, ssh into it, hold its dpkg lock, stop its sshd,
install real Debian packages — on a real two-host fleet of each kind: booted (the default) and chroots."""

import re
import subprocess

import pytest

from localfleet import Fleet, FleetError

from ..support.fleet_checks import leftovers, processes_inside, rooted_processes
from .conftest import needs_root

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module", params=["booted", "chroot"])
def fleet(request):
    fleet = Fleet.up(n=2, boot=request.param == "booted")
    fleet_dir, ports = fleet.directory, [h.port for h in fleet.hosts]
    yield fleet
    fleet.down()
    assert leftovers(fleet_dir, ports) == []  # also whatever the tests below left running in the hosts


def test_run_executes_inside_the_host_under_its_own_name(fleet):
    ws1, ws2 = fleet.hosts
    assert ws1.run(["uname", "-n"]).stdout == "ws1\n" and ws2.run(["uname", "-n"]).stdout == "ws2\n"
    ws1.run(["sh", "-c", "echo only-in-ws1 > /root/marker"])
    assert (ws1.root / "root/marker").read_text() == "only-in-ws1\n" and not (ws2.root / "root/marker").exists()
    assert ws1.run(["false"], check=False).returncode == 1
    with pytest.raises(FleetError, match=r"ws1: `ls /nonexistent` failed \(exit 2\): ls: cannot access '/nonexistent'"):
        ws1.run(["ls", "/nonexistent"])


def test_ssh_checks_each_host_key_strictly(fleet, tmp_path):
    ws1, ws2 = fleet.hosts
    assert ws1.ssh(["cat", "/etc/hostname"]).stdout == "ws1\n"
    # ws2's key filed under ws1's address: the client must refuse, so keys are per host and really checked.
    ws2_key = fleet.host_state("ws2").host_public_key
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{ws1.port} {ws2_key}\n")
    argv = [a if not a.startswith("UserKnownHostsFile=") else f"UserKnownHostsFile={wrong}" for a in ws1.ssh_argv()]
    done = subprocess.run([*argv, "true"], capture_output=True, text=True)
    assert done.returncode == 255 and "Host key verification failed" in done.stderr


def test_a_stopped_sshd_refuses_connections_and_starts_again_on_the_same_port(fleet):
    ws2 = fleet.host("ws2")
    port = ws2.port
    ws2.stop_sshd()
    assert not ws2.sshd_running()
    done = ws2.ssh(["true"], check=False)
    assert done.returncode == 255 and "Connection refused" in done.stderr
    assert fleet.host("ws1").ssh(["true"]).returncode == 0  # the other host is untouched
    ws2.start_sshd()
    assert ws2.sshd_running() and fleet.host("ws2").port == port
    assert ws2.ssh(["uname", "-n"]).stdout == "ws2\n"


def test_a_held_dpkg_lock_makes_apt_fail_naming_the_holder(fleet):
    ws1 = fleet.host("ws1")
    # Takes the locks, changes nothing. No lock timeout: apt then names the holder in an error line (after a wait it
    # does so only in progress lines, which it may not print; see roles/debian/apt_commands.py).
    apt = ["apt-get", "-y", "-o", "DPkg::Lock::Timeout=0", "autoremove"]
    with ws1.hold_dpkg_lock() as lock:
        assert lock.holding()
        done = ws1.run(apt, check=False)
        assert done.returncode == 100
        assert re.search(
            rf"Could not get lock /var/lib/dpkg/lock-frontend\. "
            rf"It is held by process {lock.pid} \(python3\)",
            done.stderr,
        ), done.stderr
        assert "Unable to acquire the dpkg frontend lock" in done.stderr
        with pytest.raises(FleetError, match="ws1: could not take the dpkg lock"):
            ws1.hold_dpkg_lock()
    assert not lock.holding()
    assert ws1.run(apt).returncode == 0  # released


def test_a_lock_holder_left_running_is_stopped_by_teardown(fleet):
    """Not released on purpose: the module fixture's teardown must stop it (it asserts nothing is left). The holder is
    found among ws2's processes by the pid its host gives it (lock.pid: the one apt names there)."""
    ws2 = fleet.host("ws2")
    lock = ws2.hold_dpkg_lock()
    assert [(p.name, p.host_pid) for p in rooted_processes(ws2.root) if p.host_pid == lock.pid] == [
        ("python3", lock.pid)
    ]


def test_apt_installs_from_debians_archive_and_no_daemon_starts(fleet):
    ws1 = fleet.host("ws1")
    # cron's maintainer script asks to start the daemon; the base's policy-rc.d must forbid it.
    ws1.apt_install(["hello", "cron"], recommends=False)
    assert ws1.run(["hello"]).stdout == "Hello, world!\n"
    assert ws1.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", "cron"]).stdout == "installed"
    assert not [p for p in processes_inside(ws1.root) if "(cron" in p]
    assert ws1.run(["pgrep", "-x", "cron"], check=False).returncode == 1
