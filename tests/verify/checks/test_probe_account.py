"""verify/checks/probe_account.py: who runs the venv's code — the account's lookup, its one-line errors, the
environment the owner's probe gets, and the walk that decides whether root may run it (GNU find as the oracle). The
probe run as that account, for real, is in test_runtime.py (as root)."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from verify.checks.probe_account import ProbeAccount, ProbeAccountError, probe_account


def test_probe_account_errors_are_one_line_usage_errors(tmp_path):
    with pytest.raises(
        ProbeAccountError,
        match=r"^--probe-user: account 'no-such-user' does not exist — pass the "
        r"venv's owner \(venv_owner\)$",
    ):
        probe_account("no-such-user", tmp_path)
    assert probe_account(None, tmp_path).uid == os.geteuid()  # tmp_path is this process's


def test_the_owners_environment_keeps_what_selects_gpus_and_libraries_only():
    account = ProbeAccount("alice", 1001, 1001, (44, 109, 1001), "/home/alice", "/bin/bash")
    env = account.environment(
        {
            "HIP_VISIBLE_DEVICES": "1",
            "ROCR_VISIBLE_DEVICES": "0",
            "LD_LIBRARY_PATH": "/x",
            "BNB_ROCM_VERSION": "72",
            "HOME": "/root",
            "PATH": "/root/bin:/usr/bin",
            "PYTHONPATH": "/root/lib",
            "SUDO_USER": "admin",
            "LANG": "C.UTF-8",
        }
    )
    assert env == {
        "HIP_VISIBLE_DEVICES": "1",
        "ROCR_VISIBLE_DEVICES": "0",
        "LD_LIBRARY_PATH": "/x",
        "BNB_ROCM_VERSION": "72",
        "LANG": "C.UTF-8",
        "HOME": "/home/alice",
        "USER": "alice",
        "LOGNAME": "alice",
        "SHELL": "/bin/bash",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }


# root_probe_refusal: the walk that decides whether root may run the venv's python. GNU find is the oracle for which
# entries are another account's or writable by one; every case is a real tree, chowned and chmodded as root.

FOREIGN = r"\( ! -uid 0 -o \( ! -type l \( -perm -o+w -o \( -perm -g+w ! -gid 0 \) \) \) \)"
NOBODY = 65534


def _find_says(root) -> list[str]:
    done = subprocess.run(
        f"find -H {shlex.quote(str(root))} -mindepth 1 {FOREIGN} -print",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def _tree(root):
    """A root-owned tree as a venv holds one: deep directories, files, links (to a file, to another account's file
    and to a directory outside with another account's file in it — never followed), a FIFO (never opened)."""
    deep = root / "lib" / "python3.11" / "site-packages" / "torch" / "include" / "ATen" / "ops"
    deep.mkdir(parents=True)
    (deep / "add.h").write_text("x")
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "theirs").write_text("x")
    os.chown(outside / "theirs", NOBODY, NOBODY)
    (root / "lib" / "linked").symlink_to(outside)
    (root / "lib" / "their-file").symlink_to(outside / "theirs")
    os.mkfifo(root / "lib" / "fifo")
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return deep


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown")
@pytest.mark.parametrize(
    "case",
    [
        "root's alone",
        "a deep file of another account",
        "a directory of another account",
        "a file writable by all",
        "a file writable by a group not root's",
        "a file writable by root's group",
        "a link (mode 0777)",
        "a deep file of another account, the venv's path a link",
    ],
)
def test_root_probe_refusal_names_what_find_names(tmp_path, case):
    from verify.checks.probe_account import root_probe_refusal

    root = tmp_path / "venv"
    deep = _tree(root)
    if case.endswith("the venv's path a link"):  # e.g. /opt/rocm-fleet/venv -> /data/venv: the top is followed
        (tmp_path / "linked-venv").symlink_to(root)
        root, deep = tmp_path / "linked-venv", tmp_path / "linked-venv" / deep.relative_to(root)
        case = "a deep file of another account"
    changed = {
        "root's alone": None,
        "a deep file of another account": deep / "add.h",
        "a directory of another account": deep,
        "a file writable by all": deep / "add.h",
        "a file writable by a group not root's": deep / "add.h",
        "a file writable by root's group": None,
        "a link (mode 0777)": None,
    }[case]
    if case in ("a deep file of another account", "a directory of another account"):
        os.chown(changed, NOBODY, -1)
    elif case == "a file writable by all":
        (deep / "add.h").chmod(0o646)
    elif case == "a file writable by a group not root's":
        os.chown(deep / "add.h", 0, NOBODY)
        (deep / "add.h").chmod(0o664)
    elif case == "a file writable by root's group":
        (deep / "add.h").chmod(0o664)
    elif case == "a link (mode 0777)":
        (deep / "link").symlink_to("add.h")
    assert _find_says(root) == ([] if changed is None else [str(changed)])  # find -H: the top followed
    refusal = root_probe_refusal(root)
    if changed is None:
        assert refusal is None
    else:
        why = "belongs to nobody" if case.endswith("another account") else "is writable by other accounts"
        assert refusal == (
            f"not run as root: {changed} {why}, and code in the venv would run as root — pass "
            "--probe-user with the venv's owner (venv_owner), or rebuild the venv as root's"
        )


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the venv is root's")
def test_root_probe_refusal_agrees_with_find_on_the_real_torch_venv():
    """~25,000 entries of a real torch 2.13.0 + bitsandbytes 0.50.1 venv (tests/support/venvs.py, built by root)."""
    from tests.support.verify_runs import torch_cpu_venv
    from verify.checks.probe_account import root_probe_refusal

    venv = torch_cpu_venv()
    found = _find_says(venv)
    refusal = root_probe_refusal(venv)
    assert (refusal is None) == (found == []), (refusal, found[:3])
    assert refusal is None or any(f" {path} " in refusal for path in found)
