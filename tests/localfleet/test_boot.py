"""Booted hosts (localfleet/container.py): systemd as PID 1 under systemd-nspawn, sshd its service on the host's
loopback port; reboots with a new boot id, the units enabled for boot run, the files kept; torn down after success,
failure, Ctrl-C, SIGTERM and kills, nspawn's own leftovers included — and the controller undisturbed.

"Nothing left" is judged by tests/support/fleet_checks.py from the kernel's own files (/proc, the cgroup2 mount,
/run/systemd/nspawn), not through localfleet's code.
"""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import localfleet.cgroups as cgroups_module
import localfleet.fleet as fleet_module
from localfleet import Fleet, FleetError, container
from localfleet.cgroups import fleet_key, hierarchies
from localfleet.layout import REPO, Layout
from localfleet.ports import free_port
from localfleet.release import release_tree

from ..support.fleet_checks import booted_hosts, booted_leftovers, command_line, leftovers, listening_sockets_of
from ..support.signals import block_interrupts
from ..support.waiting import wait_for
from .conftest import needs_root

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

BOOT_ID = "/proc/sys/kernel/random/boot_id"
# A oneshot unit enabled for boot, as a package or the deploy enables one: it appends the boot id it ran in.
BOOT_UNIT = """\
[Unit]
Description=localfleet test: note every boot
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'cat /proc/sys/kernel/random/boot_id >> /var/lib/boot-notes'

[Install]
WantedBy=multi-user.target
"""


def cgroup_of(fleet, host_name) -> Path:
    return fleet.host_cgroup(host_name)


def pids_in(cgroup: Path) -> list[int]:
    return [int(pid) for procs in cgroup.rglob("cgroup.procs") for pid in procs.read_text().split()]


def controller_view() -> dict:
    """What a booted host must not change on the controller: its host name, resolver, and whose sockets listen."""
    return {
        "hostname": socket.gethostname(),
        "resolv.conf": Path("/etc/resolv.conf").read_text(),
        "kernel.hostname": Path("/proc/sys/kernel/hostname").read_text(),
    }


@pytest.fixture(scope="module")
def fleet():
    before = controller_view()
    fleet = Fleet.up(n=2, boot=True)
    hosts = booted_hosts(fleet.directory)
    ports = [h.port for h in fleet.hosts]
    yield fleet
    fleet.down()
    assert len(hosts) == 2 and booted_leftovers(hosts) == [] and leftovers(fleet.directory, ports) == []
    assert controller_view() == before


def test_each_host_runs_systemd_as_pid_1_and_sshd_as_its_service_on_its_loopback_port_only(fleet):
    for host in fleet.hosts:
        assert host.ssh(["uname", "-n"]).stdout == f"{host.name}\n"
        assert host.ssh(["ps", "-o", "comm=", "-p", "1"]).stdout == "systemd\n"
        assert host.ssh(["systemctl", "is-system-running"]).stdout == "running\n"
        # The ssh session itself runs under ssh.service, the unit systemd started at boot.
        assert host.ssh(["sh", "-c", "cat /proc/$PPID/cgroup"]).stdout.endswith("/system.slice/ssh.service\n")
        # Everything the host runs listens on its own port of 127.0.0.1, nothing on the controller's other addresses.
        assert listening_sockets_of(pids_in(cgroup_of(fleet, host.name))) == [f"127.0.0.1:{host.port}"]
    assert fleet.host("ws1").boot_id() != fleet.host("ws2").boot_id() != Path(BOOT_ID).read_text().strip()


def test_the_units_that_would_act_on_their_own_or_on_the_controller_are_masked_and_their_services_still_start(fleet):
    host = fleet.host("ws1")
    enabled = host.run(
        ["systemctl", "is-enabled", "apt-daily-upgrade.timer", "apt-daily.timer", "systemd-networkd.service"],
        check=False,
    )
    assert enabled.stdout.split() == ["masked", "masked", "masked"]
    assert host.run(["systemctl", "list-timers", "--no-legend", "--state=active"]).stdout == ""
    # A masked timer leaves its service usable: a test can start unattended-upgrades' service itself.
    assert host.run(["systemctl", "show", "-P", "LoadState", "apt-daily-upgrade.service"]).stdout == "loaded\n"
    running = host.run(["systemctl", "list-units", "--no-legend", "--plain", "--state=running", "--type=service"])
    assert sorted(line.split()[0] for line in running.stdout.splitlines()) == [
        "dbus.service",
        "ssh.service",
        "systemd-journald.service",
        "systemd-logind.service",
    ]


def test_a_reboot_gives_a_new_boot_id_runs_the_units_enabled_for_boot_and_keeps_the_files(fleet):
    ws1, ws2 = fleet.hosts
    unit = ws1.root / "etc/systemd/system/boot-notes.service"
    unit.write_text(BOOT_UNIT)
    ws1.run(["systemctl", "enable", "boot-notes.service"])  # the real systemctl, with systemd running
    ws1.run(["sh", "-c", "echo kept > /root/marker"])
    before, other = ws1.boot_id(), ws2.boot_id()

    after = ws1.reboot()

    assert after == ws1.boot_id() != before
    assert ws1.run(["cat", "/var/lib/boot-notes"]).stdout == f"{after}\n"  # ran once, in the new boot
    assert ws1.run(["cat", "/root/marker"]).stdout == "kept\n"
    assert ws1.ssh(["systemctl", "is-system-running"]).stdout == "running\n"  # and answers on the same port
    assert ws2.boot_id() == other  # the other host did not reboot


def test_a_reboot_asked_for_inside_the_host_brings_it_back_as_a_real_workstation_comes_back(fleet):
    ws2 = fleet.host("ws2")
    before = ws2.boot_id()
    ws2.ssh(["systemctl", "reboot"], check=False)  # the session may end before the command returns

    def back_with_a_new_boot():
        done = ws2.ssh(["sh", "-c", f"systemctl is-system-running && cat {BOOT_ID}"], check=False, timeout=120)
        answer = done.stdout.split()
        return done.returncode == 0 and len(answer) == 2 and answer[1] != before

    wait_for(back_with_a_new_boot, "ws2 to come back from the reboot it asked for, with a new boot id")


def test_run_is_inside_the_host_and_a_dpkg_lock_holder_is_named_by_its_pid_there(fleet):
    ws1 = fleet.host("ws1")
    assert ws1.run(["ps", "-o", "comm=", "-p", "1"]).stdout == "systemd\n"  # its PID namespace: systemd is 1
    apt = ["apt-get", "-y", "-o", "DPkg::Lock::Timeout=0", "autoremove"]
    with ws1.hold_dpkg_lock() as lock:
        done = ws1.run(apt, check=False)
        assert done.returncode == 100 and f"It is held by process {lock.pid} (python3)" in done.stderr, done.stderr
    assert not lock.holding()
    assert ws1.run(["pgrep", "-f", "fcntl.lockf"], check=False).returncode == 1  # nothing left holding it
    assert ws1.run(apt).returncode == 0


def test_a_stopped_sshd_refuses_connections_and_starts_again_on_the_same_port(fleet):
    ws2 = fleet.host("ws2")
    ws2.stop_sshd()
    assert not ws2.sshd_running()
    done = ws2.ssh(["true"], check=False)
    assert done.returncode == 255 and "Connection refused" in done.stderr
    ws2.start_sshd()
    assert ws2.sshd_running() and ws2.ssh(["uname", "-n"]).stdout == "ws2\n"


def test_a_lock_holder_left_running_is_stopped_by_the_teardown(fleet):
    """Not released on purpose: the module fixture's teardown must stop it (it asserts nothing is left)."""
    lock = fleet.host("ws2").hold_dpkg_lock()
    assert lock.holding()


def test_without_systemd_nspawn_up_says_what_to_install_or_to_use_chroots_before_anything_is_made(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(container.shutil, "which", lambda name, path=None: None)
    with pytest.raises(
        FleetError,
        match=r"systemd-nspawn is not installed .* apt-get install systemd-container \(bin/bootstrap does\), or bring "
        r"the fleet up with chroots \(--chroot, boot=False\)",
    ):
        Fleet.up(n=1, cache=tmp_path)  # booted: the default
    assert list(tmp_path.iterdir()) == []


def test_a_machine_without_cgroup_v2_still_tears_chroot_fleets_down(monkeypatch):
    def no_cgroup_v2():
        raise FleetError("booted hosts need the cgroup v2 hierarchy, and none is mounted on this machine")

    monkeypatch.setattr(cgroups_module, "hierarchies", no_cgroup_v2)
    with Fleet.up(n=1, boot=False) as chroots:
        fleet_dir, port = chroots.directory, chroots.hosts[0].port
    assert leftovers(fleet_dir, [port]) == [] and not fleet_dir.exists()


def test_a_chroot_host_cannot_reboot():
    with Fleet.up(n=1, boot=False) as chroots:
        with pytest.raises(FleetError, match="ws1 is a chroot, which cannot reboot — bring the fleet up with booted"):
            chroots.host("ws1").reboot()


# --- teardown after failures, interruptions and kills ------------------------------------------------------------

OWNER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from localfleet import Fleet
with Fleet.up(n=1, name=sys.argv[1], boot=True) as fleet:
    print(" ".join(str(h.port) for h in fleet.hosts), flush=True)
    sys.stdin.read()
"""


def start_owner(name):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    ports = [int(p) for p in owner.stdout.readline().split()]
    assert ports, "the owner process did not bring its fleet up"
    return owner, ports


def test_a_fleet_whose_owner_was_killed_is_swept_by_the_next_up_and_nspawns_leftovers_with_it():
    name = f"bkilled-{free_port()}"
    owner, ports = start_owner(name)
    fleet_dir = Layout.default().fleet_dir(name)
    hosts = booted_hosts(fleet_dir)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert booted_leftovers(hosts) != []  # a killed owner stops nothing itself: the host runs on
    with Fleet.up(n=1) as other:
        assert other.name != name
        assert booted_leftovers(hosts) == [] and leftovers(fleet_dir, ports) == [] and not fleet_dir.exists()


def test_a_killed_nspawn_whose_container_runs_on_is_stopped_by_down_and_its_lock_removed():
    """systemd-nspawn killed by SIGKILL leaves its container running, holding the lock on the root ("Directory
    tree … is currently busy" for the next nspawn) and its files in /run/systemd/nspawn."""
    fleet = Fleet.up(n=1, boot=True)
    try:
        [host] = booted_hosts(fleet.directory)
        os.kill(host.nspawn_pid, signal.SIGKILL)
        wait_for(lambda: "systemd-nspawn" not in command_line(host.nspawn_pid), "nspawn to die")
        assert fleet.host("ws1").run(["systemctl", "is-system-running"]).stdout == "running\n"  # it runs on
        assert os.path.exists(host.lock)
    finally:
        fleet.down()
    assert booted_leftovers([host]) == [] and leftovers(fleet.directory, [fleet.hosts[0].port]) == []


def test_ctrl_c_while_the_second_host_boots_leaves_nothing(monkeypatch):
    """Ctrl-C is simulated by raising KeyboardInterrupt where a real one would land: while waiting for ws2's boot,
    with ws1 booted and ws2's container started."""
    real_wait = fleet_module.Fleet._wait_for_boot
    seen = []

    def wait_then_interrupt(self, host, fixed_port):
        if host.name == "ws2":
            seen.extend(booted_hosts(self.directory))
            raise KeyboardInterrupt
        return real_wait(self, host, fixed_port)

    monkeypatch.setattr(fleet_module.Fleet, "_wait_for_boot", wait_then_interrupt)
    name = f"bctrlc-{free_port()}"
    with pytest.raises(KeyboardInterrupt):
        Fleet.up(n=2, name=name, boot=True)
    assert len(seen) == 2 and booted_leftovers(seen) == []
    assert leftovers(Layout.default().fleet_dir(name)) == []


def test_a_host_that_cannot_boot_fails_up_with_its_console_line_and_leaves_nothing(monkeypatch):
    """The launcher starts nspawn on a root it cannot boot (its /sbin/init and systemd are not there)."""
    real_start = container.start_container

    def start_without_systemd(root, name, machine, cgroups, console_log):
        (root / "usr/lib/systemd/systemd").unlink()
        (root / "sbin/init").unlink()
        return real_start(root, name, machine, cgroups, console_log)

    monkeypatch.setattr(container, "start_container", start_without_systemd)
    name = f"bfail-{free_port()}"
    with pytest.raises(FleetError, match=r"ws1: the container exited while booting: .* — log .*ws1-console\.log"):
        Fleet.up(n=1, name=name, boot=True)
    assert leftovers(Layout.default().fleet_dir(name)) == []
    assert not (hierarchies().v2 / "localfleet" / fleet_key(Layout.default().fleet_dir(name))).exists()


# --- the command line ---------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, base_root):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "base").symlink_to(base_root.parent)
    yield cache
    # A failing test can leave a fleet up: nothing may outlive it.
    for fleet_dir in (cache / "fleets").glob("*/"):
        container.stop_containers(fleet_dir)
    release_tree(cache)


def cli(cache, *args):
    env = {**os.environ, "LOCALFLEET_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "localfleet", *args], capture_output=True, text=True, cwd=REPO, env=env
    )


def test_up_boot_reboot_status_down(cache):
    up = cli(cache, "up", "--boot", "--hosts", "1", "--name", "bcli")
    assert up.returncode == 0, up.stderr
    fleet = Fleet.attach("bcli", cache=cache)
    hosts, port = booted_hosts(fleet.directory), fleet.hosts[0].port
    before = fleet.host("ws1").boot_id()

    reboot = cli(cache, "reboot", "--name", "bcli", "ws1")
    assert reboot.returncode == 0, reboot.stderr
    assert reboot.stdout.strip() == fleet.host("ws1").boot_id() != before  # stdout: the new boot id
    assert "ws1 rebooted in " in reboot.stderr

    status = cli(cache, "status")
    assert "bcli: 1 booted host(s), login root, persistent (until `down`)" in status.stdout
    assert f"ws1  127.0.0.1:{port}  booted" in status.stdout

    down = cli(cache, "down", "--name", "bcli")
    assert down.returncode == 0 and "fleet 'bcli': torn down" in down.stderr
    assert booted_leftovers(hosts) == [] and leftovers(cache, [port]) == []


def test_reboot_of_a_chroot_host_or_an_unknown_one_is_one_line(cache):
    assert cli(cache, "up", "--chroot", "--hosts", "1", "--name", "bchroot").returncode == 0
    try:
        done = cli(cache, "reboot", "--name", "bchroot", "ws1")
        assert done.returncode == 1 and done.stderr.startswith("localfleet: ws1 is a chroot, which cannot reboot")
        done = cli(cache, "reboot", "--name", "bchroot", "ws9")
        assert done.returncode == 1 and "fleet 'bchroot' has no host 'ws9'" in done.stderr
    finally:
        assert cli(cache, "down", "--name", "bchroot").returncode == 0


def freeze_once_nspawn_runs(cgroup: Path) -> None:
    """Freeze a host's cgroup (cgroup v2's freezer) as soon as systemd-nspawn runs there (in its supervisor/), before
    the boot can finish (that takes a fraction of a second at the very least): it cannot finish until the cgroup is
    thawed or killed, so a signal sent meanwhile lands while `up` waits for that boot. Not before the launcher runs:
    frozen before its exec, it would hold up the Popen that starts it."""
    supervisor = cgroup / "supervisor" / "cgroup.procs"
    wait_for(lambda: supervisor.exists() and supervisor.read_text().strip(), f"nspawn in {cgroup}", poll_s=0.001)
    (cgroup / "cgroup.freeze").write_text("1")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_up_waits_for_a_boot_tears_down_and_exits_130_even_if_started_with_it_blocked(cache, sig):
    name = f"bsig{sig.value}"
    fleet_dir = cache / "fleets" / name
    up = subprocess.Popen(
        [sys.executable, "-m", "localfleet", "up", "--boot", "--hosts", "2", "--name", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "LOCALFLEET_CACHE": str(cache)},
        preexec_fn=block_interrupts,
    )
    try:
        freeze_once_nspawn_runs(hierarchies().v2 / "localfleet" / fleet_key(fleet_dir) / "ws2")
        seen = []
        for line in up.stderr:
            seen.append(line)
            if "ws1 listens on" in line:
                break
        hosts = booted_hosts(fleet_dir)
        up.send_signal(sig)
        _, rest = up.communicate()
    finally:
        up.kill()
    assert up.returncode == 130, "".join(seen) + rest
    assert f"interrupted ({sig.name}); what was started has been torn down" in rest
    assert len(hosts) == 2 and booted_leftovers(hosts) == [] and leftovers(cache) == [] and not fleet_dir.exists()
