"""dpkg and apt output, parsed (pure): installed package versions, and what `apt-get -s remove` would remove."""

from __future__ import annotations

import re
from dataclasses import dataclass

# dpkg's abbreviated status, second letter: the package's files are on disk unless it is not-installed (n) or only
# its configuration files are left (c).
_WITHOUT_FILES = ("n", "c")
_REMOVAL = re.compile(r"^(?:Remv|Purg) (\S+) \[([^\]]*)\]")


@dataclass(frozen=True)
class InstalledPackage:
    name: str
    version: str
    status: str  # dpkg's ${db:Status-Abbrev}, e.g. "ii "

    @property
    def on_disk(self) -> bool:
        return len(self.status) >= 2 and self.status[1] not in _WITHOUT_FILES


def parse_dpkg_query(lines: list[str]) -> dict[str, InstalledPackage]:
    """`dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'` lines -> name: package (on disk only).

    Names are as dpkg prints them, without :arch (the packages this project asks about are not multi-arch)."""
    found = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 3 or not parts[0]:
            continue
        package = InstalledPackage(name=parts[0].split(":", 1)[0], version=parts[1], status=parts[2])
        if package.on_disk:
            found[package.name] = package
    return found


def parse_apt_removal(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """`apt-get -s remove …` output -> (name, version) of every package apt would remove, in its order."""
    removed = []
    for line in lines:
        found = _REMOVAL.match(line.strip())
        if found:
            name = found.group(1).split(":", 1)[0]
            removed.append((name, found.group(2).split()[0] if found.group(2) else ""))
    return tuple(removed)
