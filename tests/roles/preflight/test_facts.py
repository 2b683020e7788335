"""roles/preflight/facts.py: recorded outputs in, parsed fact out (facts/<Fact>/<case>.json — real outputs of this
machine, and the documented formats of hosts that cannot exist here, each case naming its source); then each command
run for real on this machine and checked against Python's own view of the same thing."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from roles.preflight import facts
from tests.support.operation_cases import case_ids, grouped_cases, jsonable, process_fact, run_fact_here

CASES = grouped_cases(Path(__file__).parent / "facts")
GiB = 1024**3


@pytest.mark.parametrize(("fact", "name", "case"), CASES, ids=case_ids(CASES))
def test_fact_case(fact, name, case):
    assert jsonable(process_fact(getattr(facts, fact), case["output"])) == case["fact"]


def test_gpu_devices_match_sysfs():
    found = run_fact_here(facts.GpuDevices)
    base = Path("/sys/bus/pci/devices")
    expected = sorted(
        (d.name, (d / "vendor").read_text().strip(), (d / "class").read_text().strip()) for d in base.iterdir()
    )
    assert sorted((d.slot, d.vendor, d.pci_class) for d in found.devices) == expected
    assert found.kfd == os.path.exists("/dev/kfd")


def test_free_space_matches_statvfs_for_existing_and_future_paths(tmp_path):
    future = tmp_path / "not" / "yet" / "venv"  # its nearest existing ancestor decides the filesystem
    found = {space.path: space for space in run_fact_here(facts.FreeSpaceFor, paths=["/opt", str(future)])}
    for path, existing in (("/opt", "/opt"), (str(future), str(tmp_path))):
        stats = os.statvfs(existing)
        # Other processes write to the disk meanwhile: equal within 1 GiB, not to the byte.
        assert abs(found[path].available_bytes - stats.f_bavail * stats.f_frsize) < GiB


def test_existing_users_match_passwd():
    asked = ["root", "nobody", "no-such-user-h3a"]
    expected = {entry.pw_name for entry in pwd.getpwall()} & set(asked)
    assert run_fact_here(facts.ExistingUsers, users=asked) == expected
    assert run_fact_here(facts.ExistingUsers, users=[]) == frozenset()
