"""What a supported ROCm release is, as data: one JSON file per release in `releases/` (like auditwheel's policy
files), read by key.

A release file says what the stages install (AMD's build number, the amdgpu-install deb's revision, the amdgpu
driver repository, the torch index and requirement), what the checks expect (bitsandbytes' library for it, the GPU
architectures its builds have kernels for, the SONAMEs its libraries carry — what a distro library could be bound
in place of), and which distro packages collide with AMD's (colliding_packages stage). Adding a release is adding its
file: the inventory accepts it, the verifier checks against it, the installed verifier carries it (package data,
read with importlib.resources). A release without a file is refused, naming the known ones.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, fields, replace
from importlib import resources

RELEASES_DIR = "releases"
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class UnknownRelease(ValueError):
    """A release this checkout has no file for; the message names the known ones."""

    @classmethod
    def of(cls, release: str) -> UnknownRelease:
        return cls(
            f"ROCm {release} is not a release this checkout knows (known: {', '.join(_known())}; a release "
            f"is added as verify/stack/{RELEASES_DIR}/X.Y.Z.json)"
        )


@dataclass(frozen=True)
class CollidingPackage:
    """A distro package named like one of AMD's whose version sorts above AMD's for this release."""

    name: str
    amd_component_version: str  # AMD's version prefix; the full version appends .<build>-<revision>
    evidence: str  # where the collision was seen


@dataclass(frozen=True)
class AptRepository:
    """AMD's apt repositories for this release, as pinning sees them."""

    origin: str  # the Origin of AMD's Release files: what `Pin: release o=…` matches
    pin_priority: int
    pin_files: tuple[str, ...]  # the first is what the ROCm stage writes


@dataclass(frozen=True)
class RocmRelease:
    release: str  # "7.2.4"
    build: str  # "70204": AMD's number, part of the installer's name and every package version
    amdgpu_install_revision: str
    amdgpu_driver_release: str
    torch_index_url: str
    torch_spec: str
    bitsandbytes_library: str  # "libbitsandbytes_rocm72.so"
    gpu_archs: frozenset[str]
    sonames: frozenset[str]
    colliding_packages: tuple[CollidingPackage, ...]
    apt: AptRepository

    @property
    def major_minor(self) -> str:
        return ".".join(self.release.split(".")[:2])

    @property
    def folder(self) -> str:
        """AMD's folder name for the release: 7.2.4 → 7.2.4, but 7.2.0 → 7.2 (AMD drops a .0 patch level)."""
        major, minor, patch = self.release.split(".")
        return f"{major}.{minor}" if patch == "0" else self.release


def known_releases() -> tuple[str, ...]:
    """The releases with a file, oldest first."""
    return _known()


def rocm_release(release: str) -> RocmRelease:
    """The release `release` ("7.2.4"); UnknownRelease when there is no file for it."""
    if release not in _known():
        raise UnknownRelease.of(release)
    return _read(release)


def release_with_build(build: str) -> RocmRelease:
    """The known release whose AMD build number is `build` ("70204")."""
    for release in _known():
        if _read(release).build == build:
            return _read(release)
    raise UnknownRelease(f"no known ROCm release has build {build} (known: {', '.join(_known())})")


def newest_release() -> RocmRelease:
    return _read(_known()[-1])


def forget() -> None:
    """Read the files again on the next call (tests that add a release file)."""
    _known.cache_clear()
    _read.cache_clear()


@functools.cache
def _known() -> tuple[str, ...]:
    names = [
        entry.name[: -len(".json")]
        for entry in resources.files(__package__).joinpath(RELEASES_DIR).iterdir()
        if entry.name.endswith(".json") and _RELEASE.match(entry.name[: -len(".json")])
    ]
    return tuple(sorted(names, key=lambda name: tuple(int(part) for part in name.split("."))))


@functools.cache
def _read(release: str) -> RocmRelease:
    text = resources.files(__package__).joinpath(RELEASES_DIR).joinpath(f"{release}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if data.get("release") != release:
        raise ValueError(f"{RELEASES_DIR}/{release}.json describes release {data.get('release')!r}")
    # Every field of RocmRelease is a key of the file (the *_about keys are prose for the reader).
    found = RocmRelease(**{f.name: data[f.name] for f in fields(RocmRelease)})
    return replace(
        found,
        gpu_archs=frozenset(found.gpu_archs),
        sonames=frozenset(found.sonames),
        colliding_packages=tuple(CollidingPackage(**entry) for entry in found.colliding_packages),
        apt=AptRepository(found.apt["origin"], int(found.apt["pin_priority"]), tuple(found.apt["pin_files"])),
    )
