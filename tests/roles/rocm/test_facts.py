"""roles/rocm/facts.py: recorded outputs in, parsed fact out (facts/<Fact>/<case>.json: this machine's real outputs,
and mocks of hosts with AMD's packages, which cannot exist here — each case names its source); then each command run
for real on this machine, which has no ROCm, checked against Python's own view."""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path

import pytest

from roles.rocm import facts
from tests.support.operation_cases import case_ids, grouped_cases, jsonable, process_fact, run_fact_here

CASES = grouped_cases(Path(__file__).parent / "facts")


@pytest.mark.parametrize(("fact", "name", "case"), CASES, ids=case_ids(CASES))
def test_fact_case(fact, name, case):
    assert jsonable(process_fact(getattr(facts, fact), case["output"])) == case["fact"]


def test_rocm_apt_lists_absent():
    assert not Path("/etc/apt/sources.list.d/rocm.list").exists()
    assert run_fact_here(facts.RocmAptLists) == {}


def test_group_accounts_match_grp_and_pwd():
    asked_groups = ["video", "render", "root"]
    found = run_fact_here(facts.GroupAccounts, users=["root", "nobody", "no-such-user-h3a"], groups=asked_groups)
    assert found.groups == {entry.gr_name for entry in grp.getgrall()} & set(asked_groups)
    for user in ("root", "nobody"):
        entry = pwd.getpwnam(user)
        expected = {grp.getgrgid(gid).gr_name for gid in os.getgrouplist(user, entry.pw_gid)}
        assert found.memberships[user] == expected
    assert found.memberships["no-such-user-h3a"] is None
