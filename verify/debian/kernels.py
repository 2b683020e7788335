"""The Linux kernels dpkg has installed, the packages around each (headers, Ubuntu's modules and modules-extra), and
whether the kernel meta package in use keeps bringing modules-extra with every future kernel (pure).

Real package names (Ubuntu noble/jammy; Debian bookworm/trixie):
    linux-image-6.8.0-51-generic, linux-image-unsigned-6.8.0-51-generic   the kernel image (uname -r 6.8.0-51-generic)
    linux-modules-6.8.0-51-generic                                       Ubuntu: the common modules
    linux-modules-extra-6.8.0-51-generic                                 Ubuntu: the rest — amdgpu.ko among them
    linux-headers-6.8.0-51-generic                                       headers (DKMS; AMD's prerequisites)
    linux-image-6.1.0-28-amd64, linux-image-6.1.0-28-amd64-unsigned      Debian: one image holds every module
    linux-generic → linux-image-generic → linux-modules-extra-<version>  Ubuntu's meta packages (also -hwe-22.04)
    linux-virtual → linux-image-virtual → (no modules-extra)              cloud/virtual flavour: no amdgpu.ko
    linux-image-amd64                                                    Debian's meta package

A meta package is a `linux-*` package whose name does not carry a kernel version. It "pulls modules-extra" when it
depends, directly or through other installed meta packages, on a `linux-modules-extra-<version>` package: then apt
brings modules-extra with every kernel it brings. Nothing here reads files: the caller passes dpkg's records, from
the status file (verify) or `dpkg-query` (the pyinfra fact, `parse_dpkg_query_lines`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from verify.debian.debversion import compare_versions

_VERSIONED = re.compile(
    r"^linux-(?P<kind>image-unsigned|image|modules-extra|modules|headers)-(?P<kernel>\d+\.\d+[0-9A-Za-z.+~-]*)$"
)
_INSTALLED_STATES = ("installed", "ii", "hi")


@dataclass(frozen=True)
class KernelPackage:
    """The few fields of a dpkg record this module needs."""

    name: str
    version: str
    installed: bool
    depends: str = ""


@dataclass(frozen=True)
class KernelPackages:
    """What dpkg has for one kernel release (uname -r): package names, None where absent."""

    kernel: str
    image: str | None = None
    modules: str | None = None
    modules_extra: str | None = None
    headers: str | None = None


@dataclass(frozen=True)
class MetaPackages:
    installed: tuple[str, ...]  # kernel meta packages installed
    pulling_modules_extra: tuple[str, ...]  # those of them that bring linux-modules-extra with every kernel
    split_modules: bool  # the distribution splits modules into linux-modules(-extra) packages (Ubuntu)

    def statement(self) -> str:
        """One plain sentence on future kernels and modules-extra."""
        if not self.split_modules:
            return "every kernel image carries all its modules (no linux-modules-extra split, as on Debian)"
        if self.pulling_modules_extra:
            return (
                f"{', '.join(self.pulling_modules_extra)} bring{'s' if len(self.pulling_modules_extra) == 1 else ''}"
                " linux-modules-extra with every new kernel"
            )
        if not self.installed:
            return "no kernel meta package is installed: apt brings no new kernel, and none brings linux-modules-extra"
        return (
            f"{', '.join(self.installed)} do{'es' if len(self.installed) == 1 else ''} not bring "
            "linux-modules-extra: the kernels it brings have no amdgpu.ko — install linux-generic (or the HWE "
            "meta package linux-generic-hwe-<release>)"
        )


def kernel_of(name: str) -> tuple[str, str] | None:
    """'linux-image-6.8.0-51-generic' → ('image', '6.8.0-51-generic'); Debian's '-unsigned' images count as images;
    debug images and everything else → None."""
    if name.endswith("-dbg"):
        return None
    if name.endswith("-unsigned") and name.startswith("linux-image-"):
        name = name[: -len("-unsigned")]
    found = _VERSIONED.match(name)
    if not found:
        return None
    kind = "image" if found["kind"] == "image-unsigned" else found["kind"]
    return kind.replace("-", "_"), found["kernel"]


def is_meta_package(name: str) -> bool:
    """A `linux-…` package that brings kernels and whose name carries no kernel version (linux-generic,
    linux-image-amd64 …); the headers' meta packages (linux-headers-generic) bring no kernel and do not count."""
    if not name.startswith(
        (
            "linux-image-",
            "linux-generic",
            "linux-virtual",
            "linux-oem",
            "linux-lowlatency",
            "linux-kvm",
            "linux-aws",
            "linux-gcp",
            "linux-azure",
            "linux-signed-",
        )
    ):
        return False
    return kernel_of(name) is None and not name.endswith("-dbg")


def compare_kernels(a: str, b: str) -> int:
    """Order of two kernel releases ('6.8.0-51-generic' > '6.8.0-49-generic'), as GRUB's version sort puts them."""
    return compare_versions(a, b)


def newest(kernels: Iterable[str]) -> str | None:
    ordered = sorted(kernels, key=functools.cmp_to_key(compare_kernels))
    return ordered[-1] if ordered else None


def installed_kernels(packages: Iterable[KernelPackage]) -> dict[str, KernelPackages]:
    """kernel release → its installed packages, for every kernel whose image (or modules) dpkg has installed."""
    found: dict[str, dict[str, str]] = {}
    for package in packages:
        if not package.installed:
            continue
        parsed = kernel_of(package.name)
        if parsed is None:
            continue
        kind, kernel = parsed
        found.setdefault(kernel, {}).setdefault(kind, package.name)
    return {
        kernel: KernelPackages(kernel, **kinds)
        for kernel, kinds in found.items()
        if "image" in kinds or "modules" in kinds
    }


def _names(depends: str) -> list[str]:
    """Every package name a Depends field mentions (alternatives included, versions dropped)."""
    names = []
    for group in depends.split(","):
        for alternative in group.split("|"):
            word = alternative.strip().split(" ", 1)[0].split(":", 1)[0]
            if word:
                names.append(word)
    return names


def meta_packages(packages: Iterable[KernelPackage]) -> MetaPackages:
    installed = {p.name: p for p in packages if p.installed}
    metas = sorted(name for name in installed if is_meta_package(name))
    split = any((kernel_of(name) or ("",))[0] in ("modules", "modules_extra") for name in installed)

    @functools.cache
    def pulls_extra(name: str, depth: int = 0) -> bool:
        package = installed.get(name)
        if package is None or depth > 5:
            return False
        for dependency in _names(package.depends):
            if dependency.startswith("linux-modules-extra-"):
                return True
            if is_meta_package(dependency) and pulls_extra(dependency, depth + 1):
                return True
        return False

    # Only the top of each chain is named: linux-generic, not also the linux-image-generic it depends on.
    pulled_by_others = {dep for name in metas for dep in _names(installed[name].depends) if dep in installed}
    tops = [name for name in metas if name not in pulled_by_others] or metas
    return MetaPackages(tuple(tops), tuple(name for name in tops if pulls_extra(name)), split)


def parse_dpkg_query_lines(lines: Iterable[str]) -> tuple[KernelPackage, ...]:
    """`dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\t${Depends}\\n' 'linux-*'` output."""
    packages = []
    for line in lines:
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 3 or not fields[0]:
            continue
        status = fields[2].strip()
        packages.append(
            KernelPackage(fields[0], fields[1], status[:2] in _INSTALLED_STATES, fields[3] if len(fields) > 3 else "")
        )
    return tuple(packages)


def from_dpkg_status(packages) -> tuple[KernelPackage, ...]:
    """The `linux-*` records of dpkg's status file (verify.debian.dpkg.DpkgPackage)."""
    return tuple(
        KernelPackage(p.name, p.version, p.state == "installed", p.depends)
        for p in packages
        if p.name.startswith("linux-")
    )
