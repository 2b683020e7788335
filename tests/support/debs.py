"""Tiny real .deb packages and a scratch dpkg database to install them into — dpkg itself as the test oracle.

    scratch = ScratchDpkg(tmp_path)            # an empty root with its own dpkg database
    deb = build_deb(tmp_path, {"Package": "a", "Version": "1", "Depends": "b:any"})
    scratch.install(deb)                       # real `dpkg --root … -i`: returncode 1 when a dependency is unmet

Packages have no maintainer scripts, so installing into the scratch root runs nothing. Needs dpkg and dpkg-deb
(Debian/Ubuntu); as a non-root user dpkg is told --force-not-root.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_DEFAULTS = {"Version": "1.0", "Architecture": "amd64", "Maintainer": "Test <test@example.org>", "Description": "test"}


def build_deb(
    workdir: Path,
    control: dict[str, str],
    files: dict[str, bytes | Path] | None = None,
    links: dict[str, str] | None = None,
    conffiles: tuple[str, ...] = (),
) -> Path:
    """A .deb with this control paragraph (defaults filled in), these files and symlinks (absolute paths inside the
    package; a link maps its path to its target), and these of its files marked as conffiles."""
    fields = {**_DEFAULTS, **control}
    name = f"{fields['Package']}_{fields['Version'].replace(':', '%3a')}_{fields['Architecture']}"
    tree = workdir / f"deb-{name}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text("".join(f"{key}: {value}\n" for key, value in fields.items()))
    for path, content in (files or {}).items():
        target = tree / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.read_bytes() if isinstance(content, Path) else content)
    for path, link_target in (links or {}).items():
        link = tree / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(link_target)
    if conffiles:
        (tree / "DEBIAN/conffiles").write_text("".join(f"{path}\n" for path in conffiles))
    deb = workdir / f"{name}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    return deb


class ScratchDpkg:
    """An empty root with its own dpkg database (`root/var/lib/dpkg`), changed only by real dpkg runs."""

    def __init__(self, workdir: Path, foreign_architectures: tuple[str, ...] = ()):
        self.root = workdir / "root"
        admin = self.root / "var/lib/dpkg"
        for sub in ("info", "updates", "triggers"):
            (admin / sub).mkdir(parents=True, exist_ok=True)
        for name in ("status", "available"):
            (admin / name).touch()
        for arch in foreign_architectures:
            self.dpkg("--add-architecture", arch).check_returncode()

    def dpkg(self, *argv: str) -> subprocess.CompletedProcess:
        force = ("--force-not-root",) if os.geteuid() != 0 else ()
        return subprocess.run(["dpkg", f"--root={self.root}", *force, *argv], capture_output=True, text=True)

    def install(self, *debs: Path) -> subprocess.CompletedProcess:
        return self.dpkg("--install", *map(str, debs))

    def purge(self, *packages: str) -> subprocess.CompletedProcess:
        return self.dpkg("--purge", *packages)

    @property
    def status_text(self) -> str:
        return (self.root / "var/lib/dpkg/status").read_text()
