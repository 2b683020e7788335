"""Is the result of `bin/demo` the expected one? (pure: reports in, a verdict with one line per surprise out)

The demo's hosts are local test workstations: no system ROCm (repo.radeon.com is out of reach, there is no GPU) and
torch is the CPU build standing in for the ROCm wheel. So every host is *expected* to fail verification, and for
exactly these reasons, no other:

- linkage.static: bitsandbytes' ROCm library cannot load — its libhipblas.so.3 (and libhipblaslt.so.1) not found,
  nothing else missing, nothing bound to a distro ROCm file: the trap rocm-fleet exists for;
- versions.rocm: no system ROCm;
- versions.torch, runtime.torch: torch is not a ROCm build (the CPU stand-in).

Warnings (NF4 ran on the CPU, bitsandbytes loaded its CPU library, strays) are expected too. Anything else is a
surprise: a host with no report (unreachable, or a stage failed before verification), a report that proves nothing
(verify/report/report.py `judge_report`, the rule the verification stage applies), another failing check (NF4,
bitsandbytes' version, the runtime maps), a linkage that fails otherwise — or passes — and pyinfra exiting other
than 1 (it exits 1 exactly when a host failed, which every host does here by design).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verify.report.report import FAIL, CheckResult, Report, judge_report

# The check ids of verify/ whose failure is expected on a local test workstation, and why, in words for the output.
EXPECTED_FAILURES = {
    "linkage.static": "bitsandbytes' ROCm library cannot find libhipblas.so.3: no system ROCm",
    "versions.rocm": "no system ROCm",
    "versions.torch": "torch is the CPU stand-in, not a ROCm build",
    "runtime.torch": "torch is the CPU stand-in (no HIP)",
}
TRAP_LIBRARY = "libhipblas.so.3"
# What libbitsandbytes_rocm72.so needs from the system ROCm (its other NEEDED entries come from the base system).
SYSTEM_ROCM_NEEDED = frozenset({"libhipblas.so.3", "libhipblaslt.so.1"})
NOT_FOUND = "not found"
PYINFRA_HOSTS_FAILED = 1


@dataclass(frozen=True)
class HostVerdict:
    host: str
    surprises: tuple[str, ...]  # one line each; empty: this host's result is the expected one

    @property
    def expected(self) -> bool:
        return not self.surprises


@dataclass(frozen=True)
class DemoVerdict:
    hosts: tuple[HostVerdict, ...]
    surprises: tuple[str, ...]  # every host's surprises ("ws2: …") and the run's own, one line each

    @property
    def expected(self) -> bool:
        return not self.surprises


def _linkage_surprise(check: CheckResult, report: Report) -> str | None:
    """Why a failed linkage.static is not the expected trap, or None when it is."""
    linkage = report.linkage()
    if linkage is None:
        return f"linkage.static failed, but not because {TRAP_LIBRARY} is missing: {check.reason}"
    not_found = {entry.name for entry in linkage.bnb_needed if entry.outcome == NOT_FOUND}
    if TRAP_LIBRARY not in not_found:
        return f"linkage.static failed, but not because {TRAP_LIBRARY} is missing: {check.reason}"
    others = sorted(not_found - SYSTEM_ROCM_NEEDED)
    if others:
        return f"linkage.static: libbitsandbytes_rocm72.so also misses {', '.join(others)}, which no ROCm provides"
    if len(linkage.missing) != len(not_found):
        return f"linkage.static: more libraries are missing than bitsandbytes' ROCm ones: {list(linkage.missing)}"
    if linkage.findings:
        return f"linkage.static: {'; '.join(linkage.findings)}"
    return None


def judge_host(host: str, document: Mapping[str, Any] | None) -> HostVerdict:
    """`document`: the host's reports/<host>.json as read (None: there is none)."""
    if document is None:
        return HostVerdict(
            host,
            (
                "no verification report: the host was unreachable or a stage failed before "
                "verification (the summary says which)",
            ),
        )
    judged = judge_report(document)
    if not judged.trustworthy:
        return HostVerdict(host, (f"the report proves nothing: {judged.problem}",))
    report = Report.from_json(document)  # schema-valid: the judgement above says so
    surprises = []
    for check in report.checks:
        if check.status != FAIL:
            continue
        if check.id not in EXPECTED_FAILURES:
            surprises.append(f"{check.id} failed: {check.reason}")
        elif check.id == "linkage.static":
            why = _linkage_surprise(check, report)
            if why:
                surprises.append(why)
    linkage = report.check("linkage.static")
    if linkage is None:
        surprises.append("the report has no linkage.static check")
    elif linkage.status != FAIL:
        surprises.append(
            f"linkage.static is {linkage.status.upper()} — this host has a system ROCm "
            f"(or something serving {TRAP_LIBRARY}): {linkage.reason}"
        )
    return HostVerdict(host, tuple(surprises))


def judge_demo(hosts: list[str], reports: Mapping[str, Mapping[str, Any] | None], pyinfra_exit: int) -> DemoVerdict:
    """`reports`: host -> its report written by this run (None or absent: no report)."""
    verdicts = tuple(judge_host(host, reports.get(host)) for host in hosts)
    surprises = [f"{v.host}: {line}" for v in verdicts for line in v.surprises]
    if pyinfra_exit != PYINFRA_HOSTS_FAILED:
        if pyinfra_exit == 0:
            what = "no host failed, although every host here must fail verification"
        elif pyinfra_exit < 0:
            what = f"killed by signal {-pyinfra_exit}"
        else:
            what = "a usage or internal error (see its output above)"
        surprises.append(f"pyinfra exited {pyinfra_exit}: {what}")
    return DemoVerdict(verdicts, tuple(surprises))
