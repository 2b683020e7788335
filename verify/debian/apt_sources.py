"""apt's repository entries, parsed from sources files (pure): one-line `.list` files and deb822 `.sources` files,
including the entries that are switched off — a distribution upgrade comments third-party lines out
(`# deb https://repo.radeon.com/rocm/apt/7.2.4 noble main # disabled on upgrade to noble`), which is how AMD's
repositories silently drop out of a workstation's updates.

`amd_entries` picks AMD's: those whose URI path is one of AMD's repository layouts (`…/rocm/apt/<release>`,
`…/graphics/<release>/ubuntu`, `…/amdgpu/<driver>/ubuntu`), whatever the host (repo.radeon.com or a mirror).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AMD_PATH = re.compile(r"/(rocm/apt|graphics|amdgpu)/([0-9][0-9.]*)(?:/ubuntu)?/?$")


@dataclass(frozen=True)
class SourceEntry:
    where: str  # "/etc/apt/sources.list.d/rocm.list:2"
    uri: str
    suite: str
    components: tuple[str, ...]
    enabled: bool
    note: str = ""  # a comment after a disabled line ("disabled on upgrade to noble")

    @property
    def amd_repository(self) -> tuple[str, str] | None:
        """("rocm/apt" | "graphics" | "amdgpu", the release folder) when this is one of AMD's repositories."""
        found = _AMD_PATH.search(self.uri.rstrip("/"))
        return (found.group(1), found.group(2)) if found else None

    def describe(self) -> str:
        state = "" if self.enabled else " (disabled" + (f": {self.note}" if self.note else "") + ")"
        return f"{self.uri} {self.suite}{state} in {self.where}"


def parse_one_line(text: str, where: str) -> tuple[SourceEntry, ...]:
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        enabled = True
        if line.startswith("#"):
            line = line.lstrip("#").strip()
            enabled = False
        if not line.startswith("deb "):
            continue
        body, _, note = line.partition("#")
        words = body[4:].strip()
        if words.startswith("["):
            end = words.find("]")
            if end < 0:
                continue
            words = words[end + 1 :]
        parts = words.split()
        if len(parts) < 2:
            continue
        entries.append(
            SourceEntry(f"{where}:{number}", parts[0].rstrip("/"), parts[1], tuple(parts[2:]), enabled, note.strip())
        )
    return tuple(entries)


def parse_deb822(text: str, where: str) -> tuple[SourceEntry, ...]:
    entries = []
    number = 0
    for stanza in re.split(r"\n\s*\n", text):
        start = number + 1
        number += stanza.count("\n") + 2
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        enabled = fields.get("enabled", "yes").lower() not in ("no", "false", "0")
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                entries.append(
                    SourceEntry(
                        f"{where}:{start}", uri.rstrip("/"), suite, tuple(fields.get("components", "").split()), enabled
                    )
                )
    return tuple(entries)


def parse_sources_file(text: str, where: str) -> tuple[SourceEntry, ...]:
    return parse_deb822(text, where) if where.endswith(".sources") else parse_one_line(text, where)


def amd_entries(entries: tuple[SourceEntry, ...]) -> tuple[SourceEntry, ...]:
    return tuple(e for e in entries if e.amd_repository is not None)
