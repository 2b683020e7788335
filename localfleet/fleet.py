"""A fleet of N local test workstations: bring it up, hand out its hosts and inventory, tear it down.

    with Fleet.up(n=3) as fleet:                      # a unique name; torn down on exit, exception or Ctrl-C
        subprocess.run(["pyinfra", str(fleet.inventory), "deploy.py", "-y"])
        fleet.host("ws2").stop_sshd()
        fleet.host("ws1").reboot()
    with Fleet.up(n=1, boot=False) as fleet:          # chroots: no systemd, no reboots

Hosts boot (systemd as PID 1 under systemd-nspawn, localfleet/container.py), as real workstations do: their
processes, mounts, /run and boot id are their own, not the controller's. boot=False gives chroots, for what is about
chroots themselves or must run where systemd-nspawn cannot (no cgroup v2).

A fleet brought up by a process that dies without tearing it down is found and removed by the next `Fleet.up`
(any name) or `down`; one handed over with keep() (what `python -m localfleet up` does) stays until
`python -m localfleet down`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path

from . import container
from .base import ADMIN_USER, ensure_base, overlay_base
from .cgroups import FleetCgroups, hierarchies
from .commands import run
from .errors import FleetError
from .host import FleetHost
from .hostroot import mount_kernel_filesystems, personalize
from .interrupts import raise_if_interrupted
from .inventory import fleet_group_data, host_entry, render_inventory
from .layout import Layout, check_name
from .mounts import make_shared
from .ports import LOOPBACK, free_port, is_listening
from .procs import ProcessId
from .release import remove_tree
from .sshd import PortTaken, start_sshd, stop_sshd
from .state import FleetState, HostState, load_state, save_state

log = logging.getLogger(__name__)

MAX_HOSTS = 32
PORT_ATTEMPTS = 5
LOGINS = {"root": "root", "admin": ADMIN_USER}


def require_root() -> None:
    if os.geteuid() != 0:
        raise FleetError(
            "must run as root (localfleet mounts Debian roots as overlays, and /proc, /sys and /dev in them, chroots "
            "or boots them, and starts sshd): run it with sudo, e.g. `sudo .venv/bin/python -m localfleet up`"
        )


class FleetInUse(FleetError):
    """The fleet belongs to another process that is still running (a test session): it tears it down itself."""


def _refuse_if_owned_elsewhere(name: str, state: FleetState | None, doing: str) -> None:
    owner = state.owner if state else None
    if owner and owner.pid != os.getpid() and owner.alive():
        raise FleetInUse(
            f"fleet {name!r} belongs to running process {owner.pid}, which tears it down when it ends — {doing}"
        )


@contextlib.contextmanager
def _fleet_lock(layout: Layout, name: str, blocking: bool = True) -> Iterator[bool]:
    """Serialise up/down of one fleet name across processes; yields False when non-blocking and someone holds it.

    `down` deletes the lock file while holding it (so lock files do not pile up); a process that was waiting on the
    deleted file notices that the path now names another file (or none) and locks again.
    """
    layout.fleets.mkdir(parents=True, exist_ok=True)
    path = layout.fleet_lock(name)
    while True:
        with open(path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(lock.fileno()).st_ino:
                continue  # deleted (and maybe re-created) while we waited
            yield True
            return


def _drop_fleet_lock(layout: Layout, name: str) -> None:
    """Called with the lock held, after a teardown: the lock file goes with the fleet."""
    layout.fleet_lock(name).unlink(missing_ok=True)


class Fleet:
    """A running local fleet (see the module docstring). Get one from Fleet.up() or Fleet.attach()."""

    def __init__(self, layout: Layout, state: FleetState):
        self.layout = layout
        self._state = state
        self._down = False

    # --- bring up ---------------------------------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        n: int = 3,
        name: str | None = None,
        *,
        ports: Sequence[int] | None = None,
        login: str = "root",
        data: dict | None = None,
        cache: Path | str | None = None,
        boot: bool = True,
    ) -> Fleet:
        """Bring up `n` hosts ws1…wsN and write the inventory; on any failure (or Ctrl-C) nothing is left behind
        (a signal that lands as it returns: see down_if_ours).

        name: default a unique one; an existing fleet of that name whose owner is gone is torn down first.
        ports: one per host (default: free ports picked, retried if taken meanwhile); a taken one is an error.
        login: "root", or "admin" (a sudo account; the inventory then sets `_sudo: True`, as real fleets do).
        data: group data merged over the test-fleet defaults (e.g. {"reports_dir": "/tmp/r"}).
        boot: each host boots (systemd as PID 1 under systemd-nspawn, sshd its service); False: chroots.
        The fleet belongs to this process (torn down by the next up/down once it has gone) until keep() hands it over.
        """
        require_root()
        if not 1 <= n <= MAX_HOSTS:
            raise FleetError(f"--hosts {n}: a local fleet has 1 to {MAX_HOSTS} hosts")
        if ports is not None and len(ports) != n:
            raise FleetError(f"ports {list(ports)}: give one port per host ({n}), or none to have free ones picked")
        if login not in LOGINS:
            raise FleetError(f"login {login!r}: use one of {sorted(LOGINS)}")
        if boot:
            container.require_nspawn()
            hierarchies()
        layout = Layout.default(cache)
        name = check_name("fleet", name or f"t{os.getpid()}-{secrets.token_hex(3)}")
        sweep_abandoned(layout, skip=name)
        with _fleet_lock(layout, name):
            fleet_dir = layout.fleet_dir(name)
            if fleet_dir.exists():
                _refuse_if_owned_elsewhere(name, load_state(fleet_dir), "choose another name")
                log.warning("fleet %r: removing what an earlier run left behind in %s", name, fleet_dir)
                _teardown(layout, fleet_dir)
            base = ensure_base(layout)
            started = time.monotonic()
            try:  # from the first directory on: whatever ends this early leaves nothing behind
                fleet_dir.mkdir(parents=True)
                state = FleetState(name, str(fleet_dir), str(base), login, ProcessId.of(os.getpid()), boot=boot)
                save_state(fleet_dir, state)  # first, so that a killed `up` is recognised and cleaned later
                fleet = cls(layout, state)
                fleet._bring_up(n, ports, data or {})
                raise_if_interrupted()
                # Inside the try: a signal that lands here still tears the fleet down. One that lands after it, while
                # this returns, reaches the caller without the fleet: that caller tears it down with down_if_ours.
                log.info(
                    "fleet %r: %d %shost(s) up in %.1f s — inventory %s",
                    name,
                    n,
                    "booted " if boot else "",
                    time.monotonic() - started,
                    fleet.inventory,
                )
            except BaseException:
                log.info("fleet %r: bringing up failed, tearing down what was started", name)
                _teardown(layout, fleet_dir)
                _drop_fleet_lock(layout, name)
                raise
            return fleet

    def _bring_up(self, n: int, ports: Sequence[int] | None, data: dict) -> None:
        ssh_dir = self.directory / "ssh"
        ssh_dir.mkdir(mode=0o700)
        run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"localfleet-{self.name}", "-f", self.client_key],
            f"generating the client key of fleet {self.name}",
            fix="apt-get install openssh-client",
        )
        client_public_key = self.client_key.with_name(self.client_key.name + ".pub").read_text()
        for index in range(1, n + 1):
            raise_if_interrupted()
            name = f"ws{index}"
            root = self.directory / "hosts" / name / "root"
            root.parent.mkdir(parents=True)
            overlay_base(self.layout, Path(self._state.base), root)
            host_key = personalize(root, name, client_public_key)
            port = ports[index - 1] if ports else None
            if self.boot:
                self._start_container(root, name, port, host_key)  # all boot at once; waited for below
                continue
            mount_kernel_filesystems(root)
            port, ident = self._start_first_sshd(root, name, port)
            self._save(self._state.with_host(HostState(name, port, str(root), host_key, ident)))
            log.info("fleet %r: %s listens on %s:%d", self.name, name, LOOPBACK, port)
        for host in self._state.hosts if self.boot else ():
            raise_if_interrupted()
            self._wait_for_boot(host, fixed_port=bool(ports))
        self._write_inventory(data)

    def _start_first_sshd(self, root: Path, name: str, port: int | None) -> tuple[int, ProcessId]:
        for attempt in range(1 if port else PORT_ATTEMPTS):
            chosen = port or free_port()
            try:
                _, ident = start_sshd(root, name, chosen, self.sshd_log(name))
                return chosen, ident
            except PortTaken:
                if port:
                    raise FleetError(
                        f"{name}: port {port} on {LOOPBACK} is taken by another program — "
                        "choose a free port, or let localfleet pick one"
                    ) from None
                log.info("%s: port %d was taken meanwhile, trying another (attempt %d)", name, chosen, attempt + 1)
        raise FleetError(
            f"{name}: no free port on {LOOPBACK} after {PORT_ATTEMPTS} attempts — see {self.sshd_log(name)}"
        )

    # --- booted hosts -------------------------------------------------------------------------------------------------
    def _start_container(self, root: Path, name: str, port: int | None, host_key: str) -> None:
        # Shared: what a test mounts in the root later (a lent venv) also appears in the running host.
        make_shared(root)
        port = port or free_port()
        container.write_listen_address(root, port)
        launcher = container.start_container(
            root,
            name,
            container.machine_name(self.cgroups.key, name),
            self.cgroups.make(name),
            self.console_log(name),
        )
        self._save(self._state.with_host(HostState(name, port, str(root), host_key, container=launcher)))

    def _wait_for_boot(self, host: HostState, fixed_port: bool) -> None:
        started = time.monotonic()
        leader = container.wait_until_booted(
            host.container, self.host_cgroup(host.name), host.name, self.console_log(host.name)
        )
        port = host.port
        for attempt in range(PORT_ATTEMPTS):
            try:
                container.sshd_answers(leader, host.name, port, self.console_log(host.name))
                break
            except container.PortTaken:
                if fixed_port:
                    raise FleetError(
                        f"{host.name}: port {port} on {LOOPBACK} is taken by another program — "
                        "choose a free port, or let localfleet pick one"
                    ) from None
                log.info("%s: port %d was taken meanwhile, trying another (attempt %d)", host.name, port, attempt + 1)
                port = free_port()
                container.write_listen_address(Path(host.root), port)
                restart = container.run_inside(leader, ["systemctl", "restart", "ssh.service"])
                log.debug("%s: ssh.service restarted on port %d: %s", host.name, port, restart.stderr.strip())
        else:
            raise FleetError(
                f"{host.name}: no free port on {LOOPBACK} after {PORT_ATTEMPTS} attempts — `journalctl -u ssh` in it"
            )
        self._save(self._state.with_host(replace(host, port=port)))
        log.info(
            "fleet %r: %s listens on %s:%d (booted in %.1f s)",
            self.name,
            host.name,
            LOOPBACK,
            port,
            time.monotonic() - started,
        )

    @cached_property
    def cgroups(self) -> FleetCgroups:
        return FleetCgroups.of(self.directory)

    def host_cgroup(self, host_name: str) -> Path:
        """A booted host's cgroup (v2): its launcher, nspawn, and below payload/ everything its systemd runs."""
        return self.cgroups.host(host_name)[0]

    def _write_inventory(self, data: dict) -> None:
        user = LOGINS[self.login]
        hosts = [host_entry(h.name, h.port, user, self.client_key, self.known_hosts) for h in self._state.hosts]
        group = fleet_group_data(self.layout) | ({"_sudo": True} if self.login == "admin" else {}) | data
        partial = self.inventory.with_suffix(".partial")
        partial.write_text(render_inventory(self.name, hosts, group))
        os.replace(partial, self.inventory)

    # --- find an existing one ----------------------------------------------------------------------------------------
    @classmethod
    def attach(cls, name: str = "default", cache: Path | str | None = None) -> Fleet:
        """The running fleet `name` (e.g. one from `python -m localfleet up`), to use its hosts from Python."""
        layout = Layout.default(cache)
        state = load_state(layout.fleet_dir(name))
        if state is None:
            raise FleetError(
                f"no fleet named {name!r} in {layout.fleets} — "
                f"bring one up with `python -m localfleet up --name {name}`"
            )
        return cls(layout, state)

    # --- what a fleet has --------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._state.name

    @property
    def login(self) -> str:
        return self._state.login

    @property
    def boot(self) -> bool:
        """Whether the hosts boot (systemd as PID 1), rather than being chroots."""
        return self._state.boot

    @property
    def directory(self) -> Path:
        return Path(self._state.directory)

    @property
    def inventory(self) -> Path:
        return self.directory / "inventory.py"

    @property
    def client_key(self) -> Path:
        return self.directory / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "ssh" / "known_hosts"

    @property
    def hosts(self) -> tuple[FleetHost, ...]:
        return tuple(FleetHost(self, h.name, h.port, Path(h.root)) for h in self._state.hosts)

    def host(self, name: str) -> FleetHost:
        for host in self.hosts:
            if host.name == name:
                return host
        raise FleetError(f"fleet {self.name!r} has no host {name!r} (it has {[h.name for h in self.hosts]})")

    def host_state(self, name: str) -> HostState:
        return next(h for h in self._state.hosts if h.name == name)

    def sshd_log(self, host_name: str) -> Path:
        return self.directory / "logs" / f"{host_name}-sshd.log"

    def console_log(self, host_name: str) -> Path:
        """A booted host's console: what its systemd printed at each boot and shutdown."""
        return self.directory / "logs" / f"{host_name}-console.log"

    def record_sshd(self, host_name: str, ident: ProcessId | None) -> None:
        self._save(self._state.with_host(replace(self.host_state(host_name), sshd=ident)))

    def _save(self, state: FleetState) -> None:
        self._state = state
        save_state(self.directory, state)
        self.known_hosts.write_text("".join(f"[{LOOPBACK}]:{h.port} {h.host_public_key}\n" for h in state.hosts))

    def keep(self) -> None:
        """Hand the fleet over: it no longer belongs to this process, and stays until `python -m localfleet down`."""
        with _fleet_lock(self.layout, self.name):
            if load_state(self.directory) is None:
                raise FleetError(f"fleet {self.name!r} is gone (torn down meanwhile): nothing to keep")
            self._save(replace(self._state, owner=None))

    # --- tear down ---------------------------------------------------------------------------------------------------
    def down(self) -> None:
        """Stop every process in the hosts, unmount everything, delete the fleet's files (the base stays cached)."""
        if not self._down:
            down(self.name, cache=self.layout.cache)  # refused (FleetInUse) only if another live process owns it
            self._down = True

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc) -> None:
        self.down()


def down(name: str = "default", cache: Path | str | None = None, force: bool = False) -> bool:
    """Tear down fleet `name` — running, half-built or left by a killed process. False when there was nothing.

    A fleet owned by another live process (a test session on this shared machine) is refused with FleetInUse
    unless force=True.
    """
    require_root()
    layout = Layout.default(cache)
    with _fleet_lock(layout, name):
        fleet_dir = layout.fleet_dir(name)
        if not fleet_dir.exists():
            _drop_fleet_lock(layout, name)
            return False
        if not force:
            _refuse_if_owned_elsewhere(name, load_state(fleet_dir), "leave it, or use --force to take it down now")
        _teardown(layout, fleet_dir)
        _drop_fleet_lock(layout, name)
        return True


def down_if_ours(name: str, cache: Path | str | None = None) -> bool:
    """Tear down fleet `name` if it belongs to this process (brought up by it and not handed over with keep()).

    For a command interrupted while bringing a fleet up — even just as Fleet.up returned it, before the command held
    it: a fleet of that name that belongs to another process, or to none (kept), is left alone. False when nothing
    was torn down.
    """
    layout = Layout.default(cache)
    if not os.path.isdir(layout.fleet_dir(name)):  # (nothing to take a lock for, and no lock file to leave)
        return False
    with _fleet_lock(layout, name):
        fleet_dir = layout.fleet_dir(name)
        if not fleet_dir.exists():  # torn down while we waited for the lock
            _drop_fleet_lock(layout, name)
            return False
        state = load_state(fleet_dir)
        if state is None or state.owner is None or state.owner != ProcessId.of(os.getpid()):
            return False
        _teardown(layout, fleet_dir)
        _drop_fleet_lock(layout, name)
        return True


def _teardown(layout: Layout, fleet_dir: Path) -> None:
    started = time.monotonic()
    state = load_state(fleet_dir)
    for host in state.hosts if state else ():
        stop_sshd(host.sshd)  # the listener first, so no new session starts while the rest is stopped
    container.stop_containers(fleet_dir)  # booted hosts: found from the directory, whatever the state file says
    remove_tree(fleet_dir, inside=layout.fleets)  # every process rooted in it, every mount, then the files
    for host in state.hosts if state else ():
        if is_listening(host.port):  # not ours any more (nothing runs in the roots): someone else took the port
            log.warning("port %d (was %s) is in use by another program after teardown", host.port, host.name)
    log.info("fleet %r torn down in %.1f s", fleet_dir.name, time.monotonic() - started)


def sweep_abandoned(layout: Layout, skip: str | None = None) -> list[str]:
    """Tear down fleets whose owning process is gone (a killed test run). Returns their names."""
    swept = []
    for fleet_dir in sorted(layout.fleets.glob("*/")) if layout.fleets.is_dir() else ():
        if fleet_dir.name == skip:
            continue
        with _fleet_lock(layout, fleet_dir.name, blocking=False) as locked:
            if not locked:  # being brought up or torn down right now
                continue
            state = load_state(fleet_dir)
            if state is not None and (state.owner is None or state.owner.alive()):
                continue
            owner = f"process {state.owner.pid}, no longer running" if state else "no state file: an interrupted up"
            log.warning("removing abandoned fleet %r (%s)", fleet_dir.name, owner)
            _teardown(layout, fleet_dir)
            _drop_fleet_lock(layout, fleet_dir.name)
            swept.append(fleet_dir.name)
    return swept


def list_fleets(cache: Path | str | None = None) -> list[tuple[str, FleetState | None]]:
    """(name, state) of every fleet directory; state None when it has no readable state file (an interrupted up)."""
    layout = Layout.default(cache)
    fleet_dirs = sorted(layout.fleets.glob("*/")) if layout.fleets.is_dir() else []
    return [(fleet_dir.name, load_state(fleet_dir)) for fleet_dir in fleet_dirs]
