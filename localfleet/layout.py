"""Where localfleet keeps things on the controller (all under one directory it owns, by default .cache/localfleet/).

base/bookworm-<recipe hash>/   the debootstrapped Debian 12 root, shared read-only by every fleet
base/debs/                     debootstrap's package cache, so a rebuild downloads nothing it already has
wheelhouse/                    the controller path given to hosts as `wheelhouse` (filled by the venv stage)
fleets/<name>/                 one fleet: state.json, inventory.py, ssh/, logs/, hosts/<host>/root …
fleets/<name>.lock             held while a fleet is brought up or torn down
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import FleetError

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = REPO / ".cache" / "localfleet"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def check_name(kind: str, name: str) -> str:
    if not _NAME.fullmatch(name):
        raise FleetError(
            f"{kind} name {name!r} is not usable: use 1-40 of a-z, 0-9, '-', '_' (starting with a letter or digit)"
        )
    return name


@dataclass(frozen=True)
class Layout:
    cache: Path

    @classmethod
    def default(cls, cache: Path | str | None = None) -> Layout:
        chosen = cache or os.environ.get("LOCALFLEET_CACHE") or DEFAULT_CACHE
        return cls(Path(os.path.realpath(chosen)))

    @property
    def bases(self) -> Path:
        return self.cache / "base"

    @property
    def debs(self) -> Path:
        return self.bases / "debs"

    @property
    def wheelhouse(self) -> Path:
        return self.cache / "wheelhouse"

    @property
    def fleets(self) -> Path:
        return self.cache / "fleets"

    def fleet_dir(self, name: str) -> Path:
        return self.fleets / check_name("fleet", name)

    def fleet_lock(self, name: str) -> Path:
        return self.fleets / f"{check_name('fleet', name)}.lock"
