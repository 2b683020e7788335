"""A private apt configuration with its own repositories, lists, cache and preferences — real apt-get and
apt-cache as the oracle for pinning, without touching this machine's apt or the network.

    with AptSandbox(tmp_path) as apt:
        apt.repository("distro", origin="Debian", packages=[("rocminfo", "5.2.3-2")])
        apt.repository("amd", origin="repo.radeon.com", packages=[("rocminfo", "1.0.0.70204-93~22.04")])
        apt.preference("repo-radeon-pin-600", "Package: *\nPin: release o=repo.radeon.com\nPin-Priority: 600\n")
        apt.update()
        text = apt.policy("rocminfo")       # real `apt-cache policy` output

Repositories are flat file: repositories with a Release file that carries the Origin (what `Pin: release o=…`
matches) and a Packages index of stand-in packages (control data only: nothing is ever installed).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class AptSandbox:
    def __init__(self, workdir: Path):
        self.top = workdir / "apt-sandbox"
        self.etc = self.top / "etc"
        for directory in (
            "etc/sources.list.d",
            "etc/preferences.d",
            "etc/apt.conf.d",
            "etc/trusted.gpg.d",
            "state/lists/partial",
            "cache/archives/partial",
            "repos",
        ):
            (self.top / directory).mkdir(parents=True, exist_ok=True)
        (self.top / "status").write_text("")
        self.config = self.top / "apt.conf"
        self.config.write_text(
            "".join(
                f'{key} "{value}";\n'
                for key, value in (
                    ("Dir::Etc", self.etc),
                    ("Dir::State", self.top / "state"),
                    ("Dir::State::status", self.top / "status"),
                    ("Dir::Cache", self.top / "cache"),
                    ("Debug::NoLocking", "1"),
                    ("APT::Architecture", "amd64"),
                    ("Acquire::Languages", "none"),
                )
            )
        )
        self.sources: list[str] = []

    def __enter__(self) -> AptSandbox:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def repository(self, name: str, *, origin: str, packages: list[tuple[str, str]]) -> str:
        """A flat repository `name` with these (package, version) stand-ins; returns its file: URI."""
        root = self.top / "repos" / name
        root.mkdir(parents=True, exist_ok=True)
        (root / "Packages").write_text(
            "".join(
                f"Package: {package}\nVersion: {version}\nArchitecture: amd64\nMaintainer: tests <t@example.org>\n"
                f"Filename: ./{package}_{version}_amd64.deb\nSize: 1\nDescription: STAND-IN (tests only)\n\n"
                for package, version in packages
            )
        )
        (root / "Release").write_text(f"Origin: {origin}\nLabel: {origin}\nSuite: stable\nCodename: {name}\n")
        uri = f"file:{root}"
        self.sources.append(f"deb [trusted=yes] {uri} ./\n")
        (self.etc / "sources.list").write_text("".join(self.sources))
        return uri

    def preference(self, name: str, text: str | None) -> None:
        """Write (or, text None, remove) /etc/apt/preferences.d/NAME of the sandbox."""
        path = self.etc / "preferences.d" / name
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)

    def _run(self, *argv: str) -> str:
        env = dict(os.environ, APT_CONFIG=str(self.config), LC_ALL="C.UTF-8")
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
        return done.stdout

    def update(self) -> None:
        self._run("apt-get", "update", "-q")

    def policy(self, *names: str) -> str:
        return self._run("apt-cache", "policy", *names)
