"""verify/checks/run_as.py: the venv's code runs as the venv's owner. Real accounts (root, nobody), real privilege switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verify.checks.run_as import AccountError, account
from verify.checks.runtime import run_script

REPORT_IDENTITY = r"""
import json, os
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
                  "home": os.environ.get("HOME"), "user": os.environ.get("USER"), "kept": os.environ.get("KEEP_ME")}))
"""


def test_account_reads_the_passwd_and_group_databases():
    nobody = account("nobody")
    assert (nobody.uid, nobody.gid, nobody.home) == (65534, 65534, "/nonexistent")
    assert nobody.gid in nobody.groups


def test_an_unknown_account_is_refused_with_its_name():
    with pytest.raises(AccountError, match="no account 'no-such-user-h3a' on this host"):
        account("no-such-user-h3a")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching accounts needs root")
def test_the_child_runs_as_the_account_with_its_groups_and_home():
    nobody = account("nobody")
    run = run_script(Path("/usr/bin/python3"), REPORT_IDENTITY, [],
                     env=nobody.environment({"PATH": "/usr/bin:/bin", "HOME": "/root", "KEEP_ME": "1"}),
                     run_as=nobody.subprocess_arguments())
    assert run.data == {"uid": 65534, "euid": 65534, "gid": 65534, "groups": [65534], "home": "/nonexistent",
                        "user": "nobody", "kept": "1"}, run.error


@pytest.mark.skipif(os.geteuid() != 0, reason="the test runs as root")
def test_root_as_its_own_account_switches_nothing():
    assert account("root").subprocess_arguments() == {}
