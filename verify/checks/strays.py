"""Check 2, stray packages — the distro-archive ROCm packages installed (`verify/debian/strays.py` finds them), as one
warning with the whole strays report as its evidence, and which package owns each of their libraries (the linkage
check names the package when the loader would bind to one of them).

A system whose dpkg database cannot be read is a warning here, not a failure: the linkage check still judges every
file the loader would map.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.checks.host import Host
from verify.debian.strays import StraysReport, find_strays
from verify.report.report import PASS, WARN, CheckResult, StraysFacts

TITLE = "stray distro ROCm packages"


@dataclass(frozen=True)
class Strays:
    report: StraysReport | None
    error: str | None = None  # why there is no report


def strays(host: Host) -> Strays:
    """This run's strays report (found once; see Host.shared; none once the static part ran out of time)."""
    if host.static_stopped is not None:
        return Strays(None, host.static_stopped)
    return host.shared(_find)


def _find(host: Host) -> Strays:
    try:
        return Strays(find_strays(host.options.root, host.packages, view=host.view, sonames=host.release.sonames))
    except (OSError, ValueError) as error:
        return Strays(None, str(error))


def owners(host: Host) -> dict[str, str]:
    """{canonical library path: "package version (distro)"} for every library a stray installed."""
    found = strays(host).report
    owned = {}
    for stray in found.strays if found else ():
        for library in stray.libraries:
            owned[host.view.real_path(library.path)] = f"{stray.package} {stray.version} (distro)"
    return owned


def facts(host: Host, results: list[CheckResult]) -> dict:
    return {"strays": _summary(host)}


def _summary(host: Host) -> StraysFacts | None:
    """What the fleet summary shows of the strays (None: the database could not be read)."""
    found = strays(host).report
    if found is None:
        return None
    return StraysFacts(
        len(found.strays), tuple(s.package for s in found.strays), tuple(s.package for s in found.binding_risk)
    )


def run(host: Host) -> list[CheckResult]:
    found = strays(host)
    report = found.report
    if report is None:
        return [CheckResult("strays", TITLE, WARN, f"could not read the dpkg database: {found.error}", {})]
    evidence = report.to_json()
    if not report.strays:
        return [CheckResult("strays", TITLE, PASS, "no distro-archive ROCm packages installed", evidence)]
    first = report.binding_risk[0] if report.binding_risk else report.strays[0]
    more = f" (+{len(report.strays) - 1} more)" if len(report.strays) > 1 else ""
    reason = f"{len(report.strays)} distro ROCm package(s): {first.describe()}{more}"
    return [CheckResult("strays", TITLE, WARN, reason, evidence)]
