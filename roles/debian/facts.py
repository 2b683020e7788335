"""Facts about Debian packages: installed versions of named packages, and what apt would remove with them."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from roles.debian.packages import InstalledPackage, parse_apt_removal, parse_dpkg_query


class PackageVersions(FactBase):
    """The named packages whose files are on disk: name -> InstalledPackage. Unknown names are simply absent."""

    default = dict

    def command(self, packages) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        # dpkg-query exits 1 when a name is unknown to dpkg: that is "absent", not an error.
        return f"dpkg-query -W -f='${{Package}}\\t${{Version}}\\t${{db:Status-Abbrev}}\\n' {names} 2>/dev/null || true"

    def process(self, output) -> dict[str, InstalledPackage]:
        return parse_dpkg_query(output)


class AptRemovalSimulation(FactBase):
    """(name, version) of every package `apt-get remove` of the named packages would remove (simulated: -s)."""

    default = tuple

    def command(self, packages) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        return f"LC_ALL=C apt-get -s remove {names} 2>/dev/null || true"

    def process(self, output) -> tuple[tuple[str, str], ...]:
        return parse_apt_removal(output)
