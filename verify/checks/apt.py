"""Checks `apt.pin` and `apt.lists` — that the next `apt upgrade` keeps AMD's ROCm: AMD's pin is there and decides,
and AMD's repositories are still listed, enabled, for this release. Asked for with `--expect-amd-repo` (hosts where
the ROCm stage installs ROCm from AMD's repositories); a host whose ROCm is managed elsewhere gets neither check.

- `apt.pin`: a pin on `release o=repo.radeon.com` above the distribution's 500 in /etc/apt/preferences(.d) (AMD's
  installer deb ships /etc/apt/preferences.d/repo-radeon-pin-600; its package-manager instructions write
  rocm-pin-600), *and* effective: for every name the distributions share with AMD (the release data file,
  verify/stack/releases/<release>.json: colliding_packages and apt), apt's candidate comes from a repository whose
  Origin is repo.radeon.com — read from `apt-cache policy` (the one program this check runs: root's own
  /usr/bin/apt-cache, in English, with a time limit; it reads apt's cache and changes nothing). Ubuntu's rocminfo 5.7.1
  sorts above AMD's 1.0.0.70204: without the pin an upgrade swaps it in (ROCm issues #3656, #6367).
- `apt.lists`: AMD's repositories in /etc/apt/sources.list(.d) — rocm/apt/<release>, graphics/<release>/ubuntu and
  amdgpu/<driver>/ubuntu — present and enabled; a distribution upgrade comments them out ("disabled on upgrade to
  …").
Not checked in an image (--root): apt's cache describes the machine this runs on.
"""

from __future__ import annotations

import subprocess

from verify.checks.host import Host, result
from verify.debian.apt_policy import (
    PackagePolicy,
    Pin,
    origin_of,
    parse_package_files,
    parse_package_policies,
    parse_preferences,
    pins_origin,
)
from verify.debian.apt_sources import SourceEntry, amd_entries, parse_sources_file
from verify.report.report import FAIL, PASS, SKIP, WARN, CheckResult, StatusLine
from verify.safe_read import check_time
from verify.stack.rocm_release import RocmRelease, UnknownRelease, rocm_release
from verify.system.textfiles import list_dir, read_optional

PIN, LISTS = "apt.pin", "apt.lists"
APT_CACHE = "/usr/bin/apt-cache"
APT_CACHE_TIMEOUT = 20.0  # apt-cache answers in well under a second; this runs inside the static part's limit
PREFERENCES = "/etc/apt/preferences"
PREFERENCES_D = "/etc/apt/preferences.d"
SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_D = "/etc/apt/sources.list.d"
RESTORE = "pyinfra INVENTORY tasks/rocm.py"


def pin_text(origin: str, priority: int) -> str:
    """What AMD's pin file says (the ROCm stage writes exactly this when it is missing)."""
    return f"Package: *\nPin: release o={origin}\nPin-Priority: {priority}\n"


def read_pins(host: Host) -> tuple[list[Pin], list[str]]:
    """Every pin stanza of /etc/apt/preferences and preferences.d (apt reads files without an extension or with
    .pref), and one line per file that could not be read."""
    pins, unreadable = [], []
    names = [PREFERENCES] + [
        f"{PREFERENCES_D}/{name}"
        for name in list_dir(host.view.local(PREFERENCES_D))
        if "." not in name or name.endswith(".pref")
    ]
    for path in names:
        text, error = read_optional(host.view.local(path))
        if error:
            unreadable.append(error)
        elif text is not None:
            pins += parse_preferences(text, path)
    return pins, unreadable


def apt_cache_policy(names: tuple[str, ...] = ()) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why) of `apt-cache policy [NAME…]`."""
    check_time("running apt-cache policy")
    try:
        done = subprocess.run(
            [APT_CACHE, "policy", *names],
            capture_output=True,
            text=True,
            timeout=APT_CACHE_TIMEOUT,
            env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"},
            cwd="/",
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"{APT_CACHE} policy took longer than {APT_CACHE_TIMEOUT:.0f} s"
    except OSError as error:
        return None, f"cannot run {APT_CACHE}: {error.strerror}"
    if done.returncode != 0:
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no message")
        return None, f"{APT_CACHE} policy exited {done.returncode}: {last.strip()}"
    return done.stdout, None


def colliding_names(release: RocmRelease) -> tuple[str, ...]:
    return tuple(p.name for p in release.colliding_packages)


def judge_pin(
    release: RocmRelease, pins: list[Pin], policies: dict[str, PackagePolicy], files: dict[str, dict[str, str]]
) -> CheckResult:
    """Pure: the pin check from the pin stanzas and apt's policy."""
    apt = release.apt
    title = f"AMD's apt pin (o={apt.origin}) is present and effective"
    amd_pins = [p for p in pins if pins_origin(p, apt.origin) and (p.priority or 0) > 500]
    evidence: dict = {
        "pins": [{"file": p.where, "package": p.package, "pin": p.pin, "priority": p.priority} for p in pins],
        "names": {},
    }
    restore = (
        f"restore it: {RESTORE} (it writes {apt.pin_files[0]}: Package: * / Pin: release o={apt.origin} / "
        f"Pin-Priority: {apt.pin_priority})"
    )
    losing = []
    for name in colliding_names(release):
        policy = policies.get(name)
        if policy is None:
            evidence["names"][name] = "unknown to apt"
            continue
        amd = [v for v in policy.versions if any(origin_of(s, files) == apt.origin for s in v.repositories)]
        candidate = policy.version(policy.candidate)
        from_amd = candidate is not None and candidate in amd
        sources = ", ".join(candidate.repositories) if candidate else "nowhere"
        evidence["names"][name] = {
            "candidate": policy.candidate,
            "candidate_priority": candidate and candidate.priority,
            "candidate_from": sources,
            "amd_versions": [v.version for v in amd],
            "installed": policy.installed,
            "from_amd": from_amd,
        }
        if from_amd:
            continue
        if amd:
            losing.append(
                f"apt's candidate for {name} is {policy.candidate} (priority {candidate.priority}, from "
                f"{sources}), not AMD's {amd[0].version} (priority {amd[0].priority})"
            )
        elif candidate is not None:
            losing.append(
                f"apt knows no version of {name} from {apt.origin} (AMD's lists: see apt.lists), and its "
                f"candidate is {policy.candidate} from {sources}"
            )
    if not amd_pins:
        where = " or ".join(apt.pin_files)
        found = f" ({losing[0]})" if losing else ""
        return CheckResult(
            PIN,
            title,
            FAIL,
            f"AMD's pin is missing (no {where} pinning o={apt.origin} above 500): "
            f"an upgrade can replace AMD's packages with the distribution's{found} — {restore}",
            evidence,
        )
    pinned = f"{amd_pins[0].where} ({amd_pins[0].priority})"
    if losing:
        more = f" (+{len(losing) - 1} more)" if len(losing) > 1 else ""
        return CheckResult(
            PIN,
            title,
            FAIL,
            f"AMD's pin {pinned} is not effective: {losing[0]}{more} — find the "
            f"preferences file that outranks it (apt-cache policy {' '.join(colliding_names(release))}), or "
            f"check that the repository's Release file says Origin: {apt.origin}",
            evidence,
        )
    known = [n for n, v in evidence["names"].items() if isinstance(v, dict)]
    return CheckResult(
        PIN,
        title,
        PASS,
        f"AMD's pin {pinned} is effective: apt's candidates for "
        f"{', '.join(known) or 'the shared names'} come from {apt.origin}",
        evidence,
    )


def judge_lists(entries: list[SourceEntry], release: RocmRelease, unreadable: list[str]) -> CheckResult:
    """Pure: AMD's repositories among the host's apt entries."""
    folder = release.folder
    title = f"AMD's apt lists point at ROCm {release.release}"
    amd = amd_entries(tuple(entries))
    evidence = {"entries": [e.describe() for e in amd], "unreadable": unreadable}
    fix = f"run {RESTORE} (it rewrites AMD's lists)"
    problems = []
    for kind, label in (
        ("rocm/apt", f"rocm/apt/{folder}"),
        ("graphics", f"graphics/{folder}/ubuntu"),
        ("amdgpu", "amdgpu/<driver>/ubuntu"),
    ):
        mine = [e for e in amd if e.amd_repository[0] == kind]
        wanted = [e for e in mine if kind == "amdgpu" or e.amd_repository[1] == folder]
        enabled = [e for e in wanted if e.enabled]
        if enabled:
            continue
        if wanted:
            problems.append(f"{label} is disabled: {wanted[0].describe()}")
        elif [e for e in mine if e.enabled]:
            other = [e for e in mine if e.enabled][0]
            problems.append(f"{label} is missing; the list names {other.uri} instead ({other.where})")
        else:
            problems.append(f"{label} is missing")
    if problems:
        more = f" (also: {'; '.join(problems[1:])})" if len(problems) > 1 else ""
        return CheckResult(LISTS, title, FAIL, f"{problems[0]}{more} — {fix}", evidence)
    return CheckResult(
        LISTS, title, PASS, "enabled: " + ", ".join(f"{e.uri} {e.suite}" for e in amd if e.enabled), evidence
    )


def read_entries(host: Host) -> tuple[list[SourceEntry], list[str]]:
    entries, unreadable = [], []
    paths = [SOURCES_LIST] + [
        f"{SOURCES_D}/{name}" for name in list_dir(host.view.local(SOURCES_D)) if name.endswith((".list", ".sources"))
    ]
    for path in paths:
        text, error = read_optional(host.view.local(path))
        if error:
            unreadable.append(error)
        elif text is not None:
            entries += parse_sources_file(text, path)
    return entries, unreadable


def run(host: Host) -> list[CheckResult]:
    options = host.options
    if not options.expect_amd_repo:
        return []  # ROCm is not installed from AMD's repositories on this host (rocm_install: skip)
    if not host.view.is_host:
        return [
            CheckResult(
                PIN, "AMD's apt pin", SKIP, "not checked in an image (--root): apt's cache is this machine's", {}
            )
        ]
    try:
        release = rocm_release(options.expect_rocm)
    except UnknownRelease as error:  # `verify check` refuses it first; a library caller may not
        return [CheckResult(PIN, "AMD's apt pin", WARN, f"the pin is not checked: {error}", {})]
    entries, unreadable = read_entries(host)
    lists = judge_lists(entries, release, unreadable)
    pins, bad = read_pins(host)
    text, error = apt_cache_policy(colliding_names(release))
    files_text, files_error = apt_cache_policy() if error is None else (None, None)
    if error or files_error:
        return [
            CheckResult(PIN, "AMD's apt pin", WARN, f"cannot ask apt: {error or files_error}", {"unreadable": bad}),
            lists,
        ]
    pin = judge_pin(release, pins, parse_package_policies(text), parse_package_files(files_text))
    if bad:
        pin = CheckResult(pin.id, pin.title, pin.status, pin.reason, dict(pin.evidence, unreadable=bad))
    return [pin, lists]


def facts(host: Host, results: list[CheckResult]) -> dict:
    found = result(results, PIN)
    return {"apt_pin": StatusLine(found.status, found.reason) if found else None}
