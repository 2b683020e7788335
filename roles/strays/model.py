"""What `stray_policy: remove` may purge, from a strays report (pure).

A stray may be purged only when, after the purge, every installed package's Depends/Pre-Depends is still satisfied.
Strays can need each other (librocsparse0 -> libamdhip64-5 -> libhsa-runtime64-1), so this is a fixpoint: start from
every stray, and keep dropping from the purge set each stray that some package *outside* the set needs (a dependency
group none of whose remaining alternatives survives), until nothing changes. What is left is the largest set that can
go together; everything dropped is kept, with the dependent that keeps it. Held packages are never purged.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.debian.strays import Stray, StraysReport


@dataclass(frozen=True)
class KeptStray:
    package: str
    reason: str  # e.g. "needed by slurm-wlm-rsmi-plugin"

    def line(self) -> str:
        return f"{self.package} kept: {self.reason}"


@dataclass(frozen=True)
class RemovalPlan:
    purge: tuple[str, ...]  # apt package arguments (name, or name:arch for a foreign architecture), sorted
    kept: tuple[KeptStray, ...]

    def summary(self) -> str:
        parts = []
        if self.purge:
            parts.append(f"purge {' '.join(self.purge)}")
        parts.extend(kept.line() for kept in self.kept)
        return "; ".join(parts) if parts else "no stray distro ROCm packages"


def _key(package: str, architecture: str) -> str:
    return f"{package}:{architecture}"


def _apt_name(stray: Stray, native: str) -> str:
    return stray.package if stray.architecture in (native, "all") else f"{stray.package}:{stray.architecture}"


def plan_removal(report: StraysReport) -> RemovalPlan:
    strays = {_key(stray.package, stray.architecture): stray for stray in report.strays}
    reasons: dict[str, str] = {}
    for key, stray in strays.items():
        if stray.want == "hold":
            reasons[key] = f"on hold (apt-mark unhold {stray.package} to let it be removed)"
    removable = {key for key in strays if key not in reasons}
    changed = True
    while changed:
        changed = False
        for key in sorted(removable):
            needers = []
            for dependent in strays[key].dependents:
                dependent_key = _key(dependent.package, dependent.architecture)
                if dependent_key in removable:
                    continue  # goes too
                if any(alternative not in removable for alternative in dependent.alternatives):
                    continue  # still satisfied by something that stays
                why = dependent.package + (" (kept)" if dependent_key in reasons else "")
                if why not in needers:
                    needers.append(why)
            if needers:
                reasons[key] = f"needed by {', '.join(needers)}"
                origin = strays[key].pulled_in_by
                if set(origin) - {needer.split(" ")[0] for needer in needers}:
                    reasons[key] += f"; pulled in by {', '.join(origin)}"
                removable.discard(key)
                changed = True
    purge = tuple(sorted(_apt_name(strays[key], report.native_architecture) for key in removable))
    kept = tuple(KeptStray(strays[key].package, reasons[key]) for key in sorted(reasons))
    return RemovalPlan(purge, kept)
