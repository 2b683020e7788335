"""Regenerate the real dpkg data in this directory from real Debian roots with the distro ROCm packages installed.

    sudo .venv/bin/python tests/verify/debian/data/strays/extract.py

For each root (tests/support/debian_roots.py builds them with debootstrap + apt-get install), keeps the status
paragraphs that matter to the strays detection — every distro ROCm package, every package whose Depends or
Pre-Depends names one of them, and dpkg (the native architecture) — verbatim, plus apt's auto-installed marks for them.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[4]))

from tests.support.debian_roots import image  # noqa: E402
from verify.debian.distro_rocm import is_distro_rocm  # noqa: E402
from verify.debian.dpkg import parse_status  # noqa: E402

ROOTS = {
    "bookworm": ("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0")),
    "trixie": ("trixie", ("libucx0",)),
}


def extract(name: str, suite: str, packages: tuple[str, ...]) -> None:
    root = image(suite, packages)
    text = (root / "var/lib/dpkg/status").read_text()
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    parsed = {id(p): parse_status(p) for p in paragraphs}
    strays = {
        pkg.name for p in paragraphs for pkg in parsed[id(p)] if is_distro_rocm(pkg.source, pkg.maintainer, pkg.version)
    }
    keep = []
    for paragraph in paragraphs:
        for package in parsed[id(paragraph)]:
            mentions = any(stray in package.depends or stray in package.pre_depends for stray in strays)
            if package.name in strays or package.name == "dpkg" or mentions:
                keep.append(paragraph.strip("\n"))
    (HERE / f"{name}.status").write_text("\n\n".join(keep) + "\n")
    names = {line.split(":", 1)[1].strip() for p in keep for line in p.splitlines() if line.startswith("Package:")}
    states = (root / "var/lib/apt/extended_states").read_text()
    marks = [
        p.strip("\n") for p in states.split("\n\n") if p.strip() and p.splitlines()[0].split(":", 1)[1].strip() in names
    ]
    (HERE / f"{name}.extended_states").write_text("\n\n".join(marks) + "\n")
    print(f"{name}: {len(keep)} paragraphs, {len(marks)} auto-installed marks")


if __name__ == "__main__":
    for name, (suite, packages) in ROOTS.items():
        extract(name, suite, packages)
