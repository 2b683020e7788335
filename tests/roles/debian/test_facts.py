"""roles/debian/facts.py: recorded outputs in, parsed fact out (facts/<Fact>/<case>.json: this machine's real outputs,
and mocks of hosts with AMD's packages, which cannot exist here — each case names its source); then the commands run
for real on this machine (Debian 12, no ROCm), checked against Python's own view and dpkg itself."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

from roles.debian import facts
from tests.support.operation_cases import case_ids, grouped_cases, jsonable, process_fact, run_fact_here

CASES = grouped_cases(Path(__file__).parent / "facts")


@pytest.mark.parametrize(("fact", "name", "case"), CASES, ids=case_ids(CASES))
def test_fact_case(fact, name, case):
    assert jsonable(process_fact(getattr(facts, fact), case["output"])) == case["fact"]


def test_os_release_matches_python():
    found = run_fact_here(facts.OsReleaseFile)
    expected = platform.freedesktop_os_release()
    assert (found.id, found.version_id, found.codename) == (
        expected["ID"],
        expected["VERSION_ID"],
        expected.get("VERSION_CODENAME", ""),
    )


def test_installed_rocm_on_a_host_without_rocm():
    assert not os.path.lexists("/opt/rocm") and not any(Path("/opt").glob("rocm-*")), "this machine has ROCm"
    found = run_fact_here(facts.InstalledRocm)
    assert (found.trees, found.opt_rocm, found.packages) == ((), "", ())


def _sh(command: str) -> list[str]:
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout.splitlines()


def test_package_versions_matches_dpkg_status():
    """Installed versions as `dpkg -s` reports them; unknown and config-only names are absent, not an error."""
    asked = ["dpkg", "coreutils", "no-such-package-h3a"]
    found = process_fact(facts.PackageVersions, _sh(facts.PackageVersions().command(asked)))
    for name in ("dpkg", "coreutils"):
        status = subprocess.run(["dpkg", "-s", name], capture_output=True, text=True, check=True).stdout
        version = next(line.split(": ", 1)[1] for line in status.splitlines() if line.startswith("Version: "))
        assert found[name].version == version
        assert found[name].status.startswith("ii")
    assert "no-such-package-h3a" not in found


def test_apt_removal_simulation_lists_what_apt_would_remove():
    """`apt-get -s` changes nothing; the packages it would remove include the asked one and what depends on it."""
    removed = process_fact(facts.AptRemovalSimulation, _sh(facts.AptRemovalSimulation().command(["gcc"])))
    names = [name for name, _ in removed]
    assert "gcc" in names
    assert "build-essential" in names, f"build-essential depends on gcc; apt's answer was {removed}"
    assert subprocess.run(["dpkg", "-s", "gcc"], capture_output=True).returncode == 0, "a simulation removed gcc"
