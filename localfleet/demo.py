"""`bin/demo` — the README's main command: the whole deploy, for real, on three local test workstations.

Brings up a local fleet of three Debian 12 workstations (localfleet: containers that boot systemd, or with --chroot
plain chroots, reached over real SSH on 127.0.0.1, logged in as an admin account with sudo, as real fleets are), runs
the real `pyinfra INVENTORY deploy.py -y` against it, prints the fleet summary and says in plain words what it means,
and tears the fleet down on the way out — also after a failure, Ctrl-C or SIGTERM. Reports go to reports/demo/ (an
earlier demo's reports there are deleted first).

Exit codes: 0 the expected result: every host provisioned and verified, and failing verification only because it
has no system ROCm (bitsandbytes' libhipblas.so.3 not found) and torch is the CPU stand-in (demo_verdict.py);
1 anything else — a host unreachable, a stage failing before verification, another check failing, pyinfra exiting
other than 1, the fleet not coming up or not going down; 2 not root; 130 interrupted (after tearing down).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from .commands import die_with_parent
from .demo_verdict import DemoVerdict, judge_demo
from .errors import FleetError
from .fleet import Fleet, down_if_ours
from .interrupts import Interrupted, raise_if_interrupted, signals_deferred, signals_held, unwind_on_signals
from .layout import REPO

log = logging.getLogger("localfleet.demo")

HOSTS = 3
REPORTS = REPO / "reports" / "demo"
PYINFRA = Path(sys.executable).with_name("pyinfra")
EXIT_EXPECTED, EXIT_UNEXPECTED, EXIT_NOT_ROOT, EXIT_INTERRUPTED = 0, 1, 2, 130

EXPECTED_MEANING = """\
The expected result: all {n} test workstations were provisioned over SSH and verified, and each one FAILS
verification for the reason rocm-fleet exists to catch.

- These hosts have no system ROCm (repo.radeon.com cannot be reached from here, and there is no AMD GPU). The torch
  ROCm wheel brings its own copy of ROCm, so `import torch` works; but bitsandbytes' ROCm library,
  libbitsandbytes_rocm72.so, needs the *system* ROCm, through its RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib — and
  its libhipblas.so.3 is not found there, nor in ld.so.cache or the system directories. bitsandbytes would still
  import, and fail only at its first GPU call. On a real workstation the ROCm stage installs ROCm 7.2.4
  (amdgpu-install -y --usecase=rocm --no-dkms), and this check passes.
- torch here is the CPU build 2.13.0, a stand-in for the ROCm wheel (download.pytorch.org cannot be reached from
  here), so the torch checks fail as well, and the NF4 smoke test ran on the CPU: not a GPU pass.

pyinfra exited 1 because verification fails every host (by design); bin/demo exits 0 because this is the expected
result. Reports: {reports}/<host>.json; the same summary as a web page: {reports}/summary.html"""

UNEXPECTED_MEANING = """\
NOT the expected result — {count} thing(s) went differently:
{lines}
Expected: every host verified, and failing only because it has no system ROCm (bitsandbytes' libhipblas.so.3 not
found) and torch is the CPU stand-in. Reports: {reports}/; bin/demo exits 1."""


def run_deploy(fleet: Fleet) -> int:
    """The real pyinfra CLI on the whole deploy, its output straight to this terminal; returns pyinfra's exit code."""
    argv = [str(PYINFRA), str(fleet.inventory), "deploy.py", "-y"]
    print(f"\n== Deploying: {' '.join(argv)} ==\n", flush=True)
    child = None
    try:
        with signals_held():  # a signal now must not leave pyinfra running unknown to us (interrupts.signals_held)
            child = subprocess.Popen(argv, cwd=REPO, preexec_fn=die_with_parent)
        return child.wait()
    finally:
        # Interrupted: pyinfra may not have had the signal (SIGTERM went to us alone).
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def read_reports(reports_dir: Path, hosts: list[str]) -> dict[str, dict | None]:
    """host -> the report this run wrote for it (an earlier demo's were deleted before the run), or None; judged and
    read by demo_verdict."""
    found: dict[str, dict | None] = {}
    for host in hosts:
        try:
            found[host] = json.loads((reports_dir / f"{host}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            found[host] = None
        except (OSError, ValueError) as error:
            log.warning("%s/%s.json is not a readable report (%s)", reports_dir, host, error)
            found[host] = None
    return found


def meaning(verdict: DemoVerdict, hosts: int, reports_dir: Path) -> str:
    shown = os.path.relpath(reports_dir, Path.cwd()) if reports_dir.is_relative_to(Path.cwd()) else str(reports_dir)
    if verdict.expected:
        return EXPECTED_MEANING.format(n=hosts, reports=shown)
    lines = "\n".join(f"  - {line}" for line in verdict.surprises)
    return UNEXPECTED_MEANING.format(count=len(verdict.surprises), lines=lines, reports=shown)


def clear_reports(reports_dir: Path, hosts: int) -> None:
    """Delete what an earlier demo left in `reports_dir` — exactly the files a run writes there, nothing else — so
    that every report read afterwards is from this run (and no drift is stated against another fleet's hosts)."""
    names = [f"ws{index}.json" for index in range(1, hosts + 1)]
    for name in [*names, "summary.md", "summary.html", "history.json", *(f"last-pass/{n}" for n in names)]:
        (reports_dir / name).unlink(missing_ok=True)


def demo(hosts: int = HOSTS, reports_dir: Path = REPORTS, boot: bool = True) -> int:
    clear_reports(reports_dir, hosts)
    name = f"demo{os.getpid()}"
    fleet = None
    try:
        fleet = Fleet.up(n=hosts, name=name, login="admin", data={"reports_dir": str(reports_dir)}, boot=boot)
        pyinfra_exit = run_deploy(fleet)
        raise_if_interrupted()
        names = [host.name for host in fleet.hosts]
    finally:
        with signals_deferred():  # a teardown must finish, or mounts and sshd stay behind
            if fleet is not None:
                print("\n== Tearing the fleet down ==", flush=True)
                fleet.down()
            else:  # failed (Fleet.up tore it down itself), or interrupted just as Fleet.up returned it
                down_if_ours(name)
    summary = reports_dir / "summary.md"
    print(f"\n== Fleet summary ({summary}) ==\n", flush=True)
    print(summary.read_text(encoding="utf-8") if summary.is_file() else "(no summary was written)")
    verdict = judge_demo(names, read_reports(reports_dir, names), pyinfra_exit)
    if not summary.is_file():  # the summary is half of what the demo shows: its absence is never the expected result
        verdict = DemoVerdict(verdict.hosts, (*verdict.surprises, f"no fleet summary was written to {summary}"))
    print("== What this means ==\n")
    print(meaning(verdict, len(names), reports_dir), flush=True)
    return EXIT_EXPECTED if verdict.expected else EXIT_UNEXPECTED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/demo", description=__doc__.split("\n\n")[1].replace("\n", " "))
    parser.add_argument(
        "--reports-dir",
        type=Path,
        default=REPORTS,
        metavar="DIR",
        help=f"where the reports and the summary go (default: {REPORTS}); an earlier demo's files there are replaced",
    )
    parser.add_argument(
        "--chroot",
        action="store_true",
        help="chroot workstations instead of booted ones (no systemd in them; quicker to bring up, and no cgroup v2 "
        "or systemd-nspawn needed)",
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print(
            "bin/demo: must run as root — it builds three local Debian 12 test workstations (containers that boot "
            "systemd, sshd on 127.0.0.1): run `sudo bin/demo`",
            file=sys.stderr,
        )
        return EXIT_NOT_ROOT
    logging.basicConfig(level=logging.INFO, format="localfleet: %(message)s", stream=sys.stderr)
    unwind_on_signals()  # the fleet is torn down on the way out
    try:
        return demo(reports_dir=args.reports_dir.resolve(), boot=not args.chroot)
    except FleetError as error:
        log.error("%s", error)
        return EXIT_UNEXPECTED
    except (Interrupted, KeyboardInterrupt) as why:
        log.error("interrupted (%s); the fleet has been torn down", why or "SIGINT")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
