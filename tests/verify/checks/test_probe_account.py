"""verify/checks/probe_account.py: who runs the venv's code — the account's lookup, its one-line errors, and the
environment the owner's probe gets. The probe run as that account, for real, is in test_runtime.py (as root)."""

from __future__ import annotations

import os

import pytest

from verify.checks.probe_account import ProbeAccount, ProbeAccountError, probe_account


def test_probe_account_errors_are_one_line_usage_errors(tmp_path):
    with pytest.raises(ProbeAccountError, match=r"^--probe-user: account 'no-such-user' does not exist — pass the "
                                                r"venv's owner \(venv_owner\)$"):
        probe_account("no-such-user", tmp_path)
    assert probe_account(None, tmp_path).uid == os.geteuid()  # tmp_path is this process's


def test_the_owners_environment_keeps_what_selects_gpus_and_libraries_only():
    account = ProbeAccount("alice", 1001, 1001, (44, 109, 1001), "/home/alice", "/bin/bash")
    env = account.environment({"HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": "/x",
                               "BNB_ROCM_VERSION": "72", "HOME": "/root", "PATH": "/root/bin:/usr/bin",
                               "PYTHONPATH": "/root/lib", "SUDO_USER": "admin", "LANG": "C.UTF-8"})
    assert env == {"HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": "/x",
                   "BNB_ROCM_VERSION": "72", "LANG": "C.UTF-8", "HOME": "/home/alice", "USER": "alice",
                   "LOGNAME": "alice", "SHELL": "/bin/bash", "PATH": "/usr/local/bin:/usr/bin:/bin"}
