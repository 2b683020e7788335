"""Per-release data of the ROCm stack, as data files beside this module (`releases/<X.Y.Z>.json`), read from the
package — so it works from a checkout and from the zipapp.

`release_data("7.2.4")` gives the release's apt facts (AMD's repository Origin, the pin files, the package names the
distributions share with AMD). A release without a file gives None: the checks that need it say so instead of guessing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


@dataclass(frozen=True)
class CollidingName:
    name: str
    amd_component_version: str
    evidence: str


@dataclass(frozen=True)
class AptData:
    origin: str  # the Origin of AMD's Release files: what `Pin: release o=…` matches
    pin_priority: int
    pin_files: tuple[str, ...]
    colliding_packages: tuple[CollidingName, ...]

    @property
    def colliding_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.colliding_packages)


@dataclass(frozen=True)
class ReleaseData:
    release: str
    build: str
    apt: AptData


def release_folder(release: str) -> str:
    """AMD's folder name for a release: 7.2.4 → 7.2.4, but 7.2.0 → 7.2 (AMD drops a .0 patch level)."""
    major, minor, patch = release.split(".")
    return f"{major}.{minor}" if patch == "0" else release


def release_data(release: str) -> ReleaseData | None:
    if not _RELEASE.match(release):
        return None
    try:
        text = resources.files(__package__).joinpath("releases").joinpath(f"{release}.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
    data = json.loads(text)
    apt = data["apt"]
    return ReleaseData(
        release=data["release"],
        build=data["build"],
        apt=AptData(
            origin=apt["origin"],
            pin_priority=int(apt["pin_priority"]),
            pin_files=tuple(apt["pin_files"]),
            colliding_packages=tuple(CollidingName(p["name"], p["amd_component_version"], p["evidence"])
                                     for p in apt["colliding_packages"]),
        ),
    )
