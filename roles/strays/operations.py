"""The one operation of the strays stage: report the host's stray distro ROCm packages, or purge what may go."""

from __future__ import annotations

import shlex

from pyinfra import host, logger
from pyinfra.api import operation

from roles import run_reads
from roles.debian.apt_commands import apt_get
from roles.debian.facts import AptRemovalSimulation
from roles.run_memory import memory_of
from roles.stage import fail_command, tell_command
from roles.strays.facts import DistroRocmStrays
from roles.strays.model import RemovalPlan, plan_removal
from roles.verifier import LAUNCHER
from verify.debian.strays import StraysReport


def describe(report: StraysReport) -> str:
    if not report.strays:
        return "no stray distro ROCm packages"
    return f"{len(report.strays)} stray distro ROCm package(s): " + "; ".join(s.describe() for s in report.strays)


def _report_once(report: StraysReport, plan: RemovalPlan | None) -> None:
    """Print each stray (and what is kept, and why) once per host and run, whatever the policy: a report-only run
    changes nothing, so pyinfra itself would show nothing."""
    seen = memory_of(host.state).strays_reported
    if host.name in seen or not report.strays:
        return
    seen.add(host.name)
    for stray in report.strays:
        host.log_styled(f"stray: {stray.describe()}", fg="yellow", log_func=logger.warning)
    for kept in plan.kept if plan is not None else ():
        host.log_styled(f"stray: {kept.line()}", fg="yellow", log_func=logger.warning)


@operation()
def stray_packages(policy: str = "report", dpkg_lock_timeout: int = 300):
    """Report stray distro ROCm packages (`policy="report"`), or purge those no installed package needs (`"remove"`).

    Reads the strays fact from the installed verifier; at plan time on a host that does not have this checkout's
    verifier yet the fact is None, and the operation decides when it executes, after the install (pyinfra runs the
    body again then, with fresh facts).
    """
    if policy not in ("report", "remove"):
        raise ValueError(f"stray_packages: policy {policy!r} is not 'report' or 'remove'")
    report = run_reads.ask(DistroRocmStrays)
    if report is None and host.state.is_executing:
        # After this run's install it must run: something changed it since, and it is not run.
        yield fail_command(
            f"strays: the verifier this run installed did not run (python3 -I -S {LAUNCHER} --check says why) — "
            "run the deploy again"
        )
        return
    if report is None:
        host.noop("stray distro ROCm packages: read when this runs, after the verifier is installed")
        return
    plan = plan_removal(report) if policy == "remove" else None
    _report_once(report, plan)
    if plan is None:
        host.noop(f"{describe(report)} (stray_policy: report)" if report.strays else describe(report))
        return
    if not plan.purge:
        host.noop(plan.summary())  # "no stray distro ROCm packages", or what is kept and why
        return
    # apt-get purge also removes whatever depends on what it purges, without asking under -y. The plan says nothing
    # installed needs these; apt's own simulation, read when this runs, must agree before anything is touched.
    purged = {name.split(":")[0] for name in plan.purge}
    simulated = run_reads.ask(AptRemovalSimulation, packages=list(plan.purge))
    extra = [f"{name} {version}".strip() for name, version in simulated if name.split(":")[0] not in purged]
    if extra:
        yield fail_command(
            f"strays: purging {' '.join(plan.purge)} would also remove {', '.join(extra)} — nothing removed; "
            f"check what needs them (apt-cache rdepends --installed {' '.join(plan.purge)}) and run again"
        )
        return
    yield tell_command(f"purging {' '.join(plan.purge)}: distro ROCm packages that no installed package needs")
    yield apt_get("purge " + " ".join(shlex.quote(name) for name in plan.purge), dpkg_lock_timeout)
