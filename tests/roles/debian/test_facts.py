"""roles/debian/facts.py: recorded real outputs in, parsed fact out (tests/roles/debian/facts/<Fact>/<case>.json), and
the commands run for real on this machine (Debian 12) against dpkg itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from roles.debian import facts as debian_facts
from tests.support.operation_cases import case_ids, grouped_cases, jsonable, process_fact

CASES = grouped_cases(Path(__file__).parent / "facts")


@pytest.mark.parametrize(("fact", "name", "case"), CASES, ids=case_ids(CASES))
def test_fact_case(fact, name, case):
    assert jsonable(process_fact(getattr(debian_facts, fact), case["output"])) == case["fact"]


def _sh(command: str) -> list[str]:
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout.splitlines()


def test_package_versions_matches_dpkg_status():
    """Installed versions as `dpkg -s` reports them; unknown and config-only names are absent, not an error."""
    asked = ["dpkg", "coreutils", "no-such-package-h3a"]
    found = process_fact(debian_facts.PackageVersions, _sh(debian_facts.PackageVersions().command(asked)))
    for name in ("dpkg", "coreutils"):
        status = subprocess.run(["dpkg", "-s", name], capture_output=True, text=True, check=True).stdout
        version = next(line.split(": ", 1)[1] for line in status.splitlines() if line.startswith("Version: "))
        assert found[name].version == version
        assert found[name].status.startswith("ii")
    assert "no-such-package-h3a" not in found


def test_apt_removal_simulation_lists_what_apt_would_remove():
    """`apt-get -s` changes nothing; the packages it would remove include the asked one and what depends on it."""
    removed = process_fact(debian_facts.AptRemovalSimulation, _sh(debian_facts.AptRemovalSimulation().command(["gcc"])))
    names = [name for name, _ in removed]
    assert "gcc" in names
    assert "build-essential" in names, f"build-essential depends on gcc; apt's answer was {removed}"
    assert subprocess.run(["dpkg", "-s", "gcc"], capture_output=True).returncode == 0, "a simulation removed gcc"
