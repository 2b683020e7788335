"""`python -m localfleet up|down|status|reboot` — the command line of the local test fleet.

Exit codes: 0 done, 1 the fleet could not be brought up or torn down (one line says why), 2 bad usage,
130 interrupted (after tearing down what had been started). A reader that stops early (`… status | head`) is not an
error: what it did not read is dropped.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from .errors import FleetError
from .fleet import MAX_HOSTS, Fleet, FleetInUse, down, down_if_ours, list_fleets, require_root
from .interrupts import SIGNALS, Interrupted, raise_if_interrupted, signals_deferred, unwind_on_signals
from .layout import check_name

log = logging.getLogger("localfleet")


def cmd_up(args: argparse.Namespace) -> int:
    require_root()  # before the try: its except looks into the fleets directory
    try:
        # This process's until kept below.
        fleet = Fleet.up(n=args.hosts, name=args.name, login=args.login, boot=args.boot)
        for host in fleet.hosts:
            log.info("  %s  ssh %s", host.name, " ".join(host.ssh_argv()))
        raise_if_interrupted()
        # `up` succeeds here: a signal from now on is too late to undo it, and must not make main say it did
        # (the process ends in a moment; blocked signals die with it).
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        fleet.keep()
    except BaseException:
        # Failed or interrupted on the way — even just as Fleet.up returned, before `fleet` was set: as main says,
        # nothing this `up` started stays up (a fleet of that name that belongs to someone else is left alone).
        with signals_deferred():
            down_if_ours(args.name)
        raise
    log.info("fleet %r is up; `python -m localfleet down --name %s` tears it down", fleet.name, fleet.name)
    print(fleet.inventory)  # stdout: just the inventory path, for scripts: inv=$(python -m localfleet up)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    with signals_deferred():
        if args.all:
            names = [name for name, _ in list_fleets()]
        else:
            names = [args.name]
        refused = 0
        for name in names:
            try:
                log.info("fleet %r: %s", name, "torn down" if down(name, force=args.force) else "nothing to tear down")
            except FleetInUse as error:
                log.error("%s", error)
                refused += 1
    return 1 if refused else 0


def cmd_reboot(args: argparse.Namespace) -> int:
    require_root()
    boot_id = Fleet.attach(args.name).host(args.host).reboot()
    print(boot_id)  # stdout: the new boot id, for scripts
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    fleets = list_fleets()
    if not fleets:
        print("no local fleets")
    for name, state in fleets:
        if state is None:
            print(f"{name}: no state file (an interrupted up) — `python -m localfleet down --name {name}` removes it")
            continue
        if state.owner is None:
            owner = "persistent (until `down`)"
        else:
            owner = f"owned by pid {state.owner.pid}" + (
                "" if state.owner.alive() else " — gone: stale, next up/down removes it"
            )
        kind = "booted" if state.boot else "chroot"
        print(f"{state.name}: {len(state.hosts)} {kind} host(s), login {state.login}, {owner}")
        print(f"  inventory {state.directory}/inventory.py")
        for host in state.hosts:
            if state.boot:
                running = "booted" if host.container and host.container.alive() else "DOWN"
            else:
                running = "sshd up" if host.sshd and host.sshd.alive() else "sshd DOWN"
            print(f"  {host.name}  127.0.0.1:{host.port}  {running}  root {host.root}")
    return 0


def _host_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_HOSTS:
        raise argparse.ArgumentTypeError(f"{text!r}: a local fleet has 1 to {MAX_HOSTS} hosts")
    return int(text)


def _fleet_name(text: str) -> str:
    try:
        return check_name("fleet", text)
    except FleetError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localfleet", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = sub.add_parser("up", help="bring up N test workstations and print the inventory path")
    up.add_argument("--hosts", type=_host_count, default=3, metavar="N", help="number of hosts (default 3)")
    up.add_argument("--name", type=_fleet_name, default="default", help="fleet name (default: default)")
    up.add_argument(
        "--login",
        choices=("root", "admin"),
        default="root",
        help="SSH login of the inventory: root, or admin with sudo (_sudo: True), as real fleets do",
    )
    kind = up.add_mutually_exclusive_group()
    kind.add_argument(
        "--boot",
        dest="boot",
        action="store_true",
        default=True,
        help="hosts that boot: systemd as PID 1 (systemd-nspawn --boot), sshd its service (the default)",
    )
    kind.add_argument(
        "--chroot",
        dest="boot",
        action="store_false",
        help="chroots instead, each with a plain sshd: no systemd, no reboots",
    )
    up.set_defaults(run=cmd_up)
    dn = sub.add_parser("down", help="tear a fleet down: processes, mounts, files (the cached base stays)")
    dn.add_argument("--name", type=_fleet_name, default="default", help="fleet name (default: default)")
    dn.add_argument("--all", action="store_true", help="every local fleet")
    dn.add_argument(
        "--force", action="store_true", help="also fleets that belong to a running process (another test session)"
    )
    dn.set_defaults(run=cmd_down)
    st = sub.add_parser("status", help="list local fleets and their hosts")
    st.set_defaults(run=cmd_status)
    rb = sub.add_parser(
        "reboot", help="reboot one host of a booted fleet; prints its new boot id once it is back (sshd answering)"
    )
    rb.add_argument("--name", type=_fleet_name, default="default", help="fleet name (default: default)")
    rb.add_argument("host", metavar="HOST", help="the host, e.g. ws1")
    rb.set_defaults(run=cmd_reboot)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="localfleet: %(message)s", stream=sys.stderr
    )
    unwind_on_signals()  # a half-done `up` tears itself down
    try:
        code = args.run(args)
        sys.stdout.flush()  # here, where a closed pipe can still be caught, not at exit
        return code
    except BrokenPipeError:
        _discard_stdout()
        return 0
    except FleetError as error:
        log.error("%s", error)
        return 1
    except Interrupted as why:
        torn_down = "; what was started has been torn down" if args.command == "up" else ""
        log.error("interrupted (%s)%s", why, torn_down)
        return 130


def _discard_stdout() -> None:
    """Python flushes stdout once more at exit, which would fail again with an "Exception ignored" message: point it
    at /dev/null, so what is left in its buffer has somewhere to go."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
