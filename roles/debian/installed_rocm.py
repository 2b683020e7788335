"""Which ROCm a host has, read from the host itself (pure): every /opt/rocm-* tree with its .info/version, where
/opt/rocm points, and dpkg's record of AMD's `rocm-core` and `rocm` packages — never from a marker file of ours, so a
host provisioned by hand counts as provisioned. The preflight stage asks whether ROCm is still to be installed (it
needs disk), the ROCm stage what to do about it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RELEASE_IN_TEXT = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_PACKAGE_RELEASE = re.compile(r"^(\d+\.\d+\.\d+)\.(\d{5,6})\b")  # 7.2.4.70204-93~24.04 -> 7.2.4, 70204
INSTALLED_STATES = ("ii", "hi")  # dpkg: wanted install/hold, status installed


@dataclass(frozen=True)
class RocmTree:
    path: str  # /opt/rocm-7.2.4
    release: str  # from its .info/version, else from the directory name; "" when neither says


@dataclass(frozen=True)
class RocmPackage:
    name: str  # rocm-core, rocm-core7.2.4, rocm, rocm7.2.4
    version: str
    status: str  # dpkg's abbreviated status, "ii" when installed

    @property
    def installed(self) -> bool:
        return self.status[:2] in INSTALLED_STATES

    @property
    def release(self) -> str:
        found = _PACKAGE_RELEASE.match(self.version)
        return found.group(1) if found else ""

    @property
    def build(self) -> str:
        found = _PACKAGE_RELEASE.match(self.version)
        return found.group(2) if found else ""

    @property
    def multi_version(self) -> bool:
        """AMD's multi-version packages carry the release in the name (rocm-core7.2.4)."""
        return bool(re.search(r"\d+\.\d+\.\d+$", self.name))


@dataclass(frozen=True)
class RocmInstallation:
    trees: tuple[RocmTree, ...]
    opt_rocm: str  # where /opt/rocm resolves to ("" when absent)
    packages: tuple[RocmPackage, ...]

    def releases(self) -> tuple[str, ...]:
        """Every release that left a trace: a tree under /opt or an installed rocm-core/rocm package."""
        found = {tree.release for tree in self.trees if tree.release}
        found.update(p.release for p in self.packages if p.installed and p.release)
        return tuple(sorted(found, key=lambda r: tuple(int(x) for x in r.split("."))))

    def is_complete(self, release: str, build: str) -> bool:
        """The release's tree is there and dpkg has its rocm-core and its `rocm` meta package installed."""
        tree = any(t.release == release and t.path == f"/opt/rocm-{release}" for t in self.trees)
        installed = [p for p in self.packages if p.installed and p.release == release and p.build == build]
        core = any(p.name in ("rocm-core", f"rocm-core{release}") for p in installed)
        meta = any(p.name in ("rocm", f"rocm{release}") for p in installed)
        return tree and core and meta

    def single_version_release(self) -> str:
        """The release installed with AMD's unversioned packages (a single-version install), or ""."""
        for package in self.packages:
            if package.installed and package.name == "rocm-core":
                return package.release
        return ""


def parse_installation(lines: list[str]) -> RocmInstallation:
    """Lines `tree PATH VERSION-TEXT`, `opt-rocm TARGET`, `pkg NAME VERSION STATUS` (see roles/debian/facts.py)."""
    trees, packages, opt_rocm = [], [], ""
    for line in lines:
        words = line.split()
        if not words:
            continue
        if words[0] == "tree" and len(words) >= 2:
            path = words[1]
            found = _RELEASE_IN_TEXT.search(" ".join(words[2:])) or _RELEASE_IN_TEXT.search(path.rsplit("/", 1)[-1])
            trees.append(RocmTree(path=path, release=".".join(found.groups()) if found else ""))
        elif words[0] == "opt-rocm":
            opt_rocm = words[1] if len(words) > 1 else ""
        elif words[0] == "pkg" and len(words) >= 4:
            packages.append(RocmPackage(name=words[1], version=words[2], status=words[3]))
    return RocmInstallation(trees=tuple(trees), opt_rocm=opt_rocm, packages=tuple(packages))
