"""apt's policy, parsed from `apt-cache policy` output (pure): which version apt would install of each package, with
which priority, from which repository — and the pin files that decide it.

Two outputs are read (apt 2.x, LC_ALL=C):

`apt-cache policy` (no names): the package files with their Release facts, e.g.
    Package files:
     100 /var/lib/dpkg/status
         release a=now
     600 http://127.0.0.1:8431/rocm/apt/7.2.4 jammy/main amd64 Packages
         release o=repo.radeon.com,n=jammy,c=main,b=amd64
         origin 127.0.0.1
    Pinned packages:

`apt-cache policy NAME…`: each package's installed and candidate version and its version table, e.g.
    rocminfo:
      Installed: (none)
      Candidate: 1.0.0.70204-93~22.04
      Version table:
         1.0.0.70204-93~22.04 600
            600 http://127.0.0.1:8431/rocm/apt/7.2.4 jammy/main amd64 Packages
     *** 5.2.3-2 500
            500 http://deb.debian.org/debian bookworm/main amd64 Packages
            100 /var/lib/dpkg/status
A name apt does not know is simply absent. `origin_of` joins the two: the Origin (`o=`) of the repository a version
comes from, which is what AMD's pin (`Pin: release o=repo.radeon.com`) matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PACKAGE = re.compile(r"^(\S+):$")
_VERSION = re.compile(r"^ (\*\*\*| {3}) (\S+) (-?\d+)$")
_SOURCE = re.compile(r"^ {8}(-?\d+) (.+)$")
_FILE = re.compile(r"^ (-?\d+) (.+)$")
_RELEASE = re.compile(r"^ {5}release (.*)$")


@dataclass(frozen=True)
class VersionSource:
    priority: int
    source: str  # "http://deb.debian.org/debian bookworm/main amd64 Packages" or "/var/lib/dpkg/status"

    @property
    def is_status(self) -> bool:
        """dpkg's status file (the installed version), the one version source that is a local path, not a URI."""
        return self.source.startswith("/")


@dataclass(frozen=True)
class PolicyVersion:
    version: str
    priority: int
    installed: bool
    sources: tuple[VersionSource, ...]

    @property
    def repositories(self) -> tuple[str, ...]:
        return tuple(s.source for s in self.sources if not s.is_status)


@dataclass(frozen=True)
class PackagePolicy:
    name: str
    installed: str | None
    candidate: str | None
    versions: tuple[PolicyVersion, ...]

    def version(self, version: str | None) -> PolicyVersion | None:
        return next((v for v in self.versions if v.version == version), None)


def parse_package_policies(text: str) -> dict[str, PackagePolicy]:
    """`apt-cache policy NAME…` → name → PackagePolicy."""
    policies: dict[str, PackagePolicy] = {}
    name = installed = candidate = None
    versions: list[PolicyVersion] = []
    current: list | None = None

    def finish() -> None:
        if name is not None:
            policies[name] = PackagePolicy(name, installed, candidate, tuple(versions))

    for line in text.splitlines():
        if (found := _PACKAGE.match(line)) and not line.startswith(" "):
            finish()
            name, installed, candidate, versions, current = found.group(1), None, None, [], None
            continue
        stripped = line.strip()
        if stripped.startswith("Installed:"):
            installed = _none(stripped.split(":", 1)[1])
        elif stripped.startswith("Candidate:"):
            candidate = _none(stripped.split(":", 1)[1])
        elif found := _VERSION.match(line):
            current = []
            versions.append(PolicyVersion(found.group(2), int(found.group(3)), found.group(1) == "***", ()))
            versions[-1] = _with_sources(versions[-1], current)
        elif (found := _SOURCE.match(line)) and current is not None:
            current.append(VersionSource(int(found.group(1)), found.group(2).strip()))
            versions[-1] = _with_sources(versions[-1], current)
    finish()
    return policies


def _with_sources(version: PolicyVersion, sources: list) -> PolicyVersion:
    return PolicyVersion(version.version, version.priority, version.installed, tuple(sources))


def _none(value: str) -> str | None:
    value = value.strip()
    return None if value in ("(none)", "") else value


def parse_package_files(text: str) -> dict[str, dict[str, str]]:
    """`apt-cache policy` (no names) → package file ("URL SUITE/COMPONENT ARCH Packages") → its release facts
    ({"o": "repo.radeon.com", "n": "jammy", …})."""
    files: dict[str, dict[str, str]] = {}
    current = None
    in_files = False
    for line in text.splitlines():
        if line.startswith("Package files:"):
            in_files = True
            continue
        if line.startswith("Pinned packages:"):
            break
        if not in_files:
            continue
        if found := _FILE.match(line):
            current = found.group(2).strip()
            files[current] = {}
        elif (found := _RELEASE.match(line)) and current is not None:
            for pair in found.group(1).split(","):
                key, _, value = pair.partition("=")
                if key:
                    files[current][key.strip()] = value.strip()
    return files


def origin_of(source: str, files: dict[str, dict[str, str]]) -> str | None:
    """The Origin (o=) of the repository `source` (a version table line) belongs to."""
    return files.get(source, {}).get("o")


# --- pin files -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    where: str  # the file
    package: str  # "*" or names
    pin: str  # "release o=repo.radeon.com"
    priority: int | None


def parse_preferences(text: str, where: str) -> tuple[Pin, ...]:
    """The stanzas of an apt preferences file (`Package:`, `Pin:`, `Pin-Priority:`); comments, Explanation ignored."""
    pins = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.lstrip().startswith("#") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "pin" in fields and "package" in fields:
            try:
                priority = int(fields.get("pin-priority", ""))
            except ValueError:
                priority = None
            pins.append(Pin(where, fields["package"], fields["pin"], priority))
    return tuple(pins)


def pins_origin(pin: Pin, origin: str) -> bool:
    """The pin applies to every package of the repositories with Origin `origin` (AMD's: `Package: *`,
    `Pin: release o=repo.radeon.com`)."""
    if pin.package.strip() != "*" or not pin.pin.startswith("release "):
        return False
    terms = dict(part.strip().partition("=")[::2] for part in pin.pin[len("release ") :].split(","))
    return terms.get("o") == origin
