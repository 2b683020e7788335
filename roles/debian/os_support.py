"""Which operating systems the deploy supports, and which of AMD's Ubuntu package sets each one takes (pure).

The one place that branches on the distribution. AMD publishes amdgpu-install for Ubuntu 24.04 (noble) and 22.04
(jammy); AMD's Debian 12 instructions use the jammy packages. Debian 13 runs every stage but AMD's installer: it is
for test fleets whose ROCm is managed elsewhere (`rocm_install: skip`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class OsRelease:
    """The fields of /etc/os-release the deploy uses."""

    id: str  # "ubuntu", "debian"
    version_id: str  # "24.04", "12"
    codename: str  # "noble", "bookworm"
    pretty_name: str

    @property
    def label(self) -> str:
        if not (self.id or self.pretty_name):
            return "an OS without /etc/os-release"
        name = self.pretty_name or f"{self.id} {self.version_id}".strip()
        return f"{name} ({self.codename})" if self.codename else name


def parse_os_release(lines: list[str]) -> OsRelease:
    """Parse os-release(5) text: KEY=value lines, values optionally shell-quoted; comments and junk ignored."""
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.strip().partition("=")
        if not sep or not key or key.startswith("#"):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            words = [value]
        fields[key] = words[0] if words else ""
    codename = fields.get("VERSION_CODENAME") or fields.get("UBUNTU_CODENAME", "")
    return OsRelease(
        id=fields.get("ID", "").lower(),
        version_id=fields.get("VERSION_ID", ""),
        codename=codename.lower(),
        pretty_name=fields.get("PRETTY_NAME", ""),
    )


@dataclass(frozen=True)
class Support:
    supported: bool
    # Ubuntu codename of AMD's packages for this OS; None: AMD's installer is not to be used here.
    installer_codename: str | None
    note: str  # why, for messages


# (os-release ID, VERSION_ID) -> what the deploy does there.
SUPPORTED: dict[tuple[str, str], Support] = {
    ("ubuntu", "24.04"): Support(True, "noble", "Ubuntu 24.04 takes AMD's noble packages"),
    ("ubuntu", "22.04"): Support(True, "jammy", "Ubuntu 22.04 takes AMD's jammy packages"),
    ("debian", "12"): Support(True, "jammy", "Debian 12 takes AMD's jammy packages, as AMD's Debian instructions do"),
    ("debian", "13"): Support(
        True, None, "Debian 13 is for test fleets: every stage but AMD's installer (set rocm_install: skip)"
    ),
}

SUPPORTED_LABEL = (
    "Ubuntu 24.04 (noble), Ubuntu 22.04 (jammy), Debian 12 (bookworm); Debian 13 only with rocm_install: skip"
)


def support_for(os_release: OsRelease) -> Support:
    found = SUPPORTED.get((os_release.id, os_release.version_id))
    if found is None:
        return Support(False, None, f"{os_release.label} is not supported (supported: {SUPPORTED_LABEL})")
    return found
