"""roles/debian/path_access.py and the VenvPathAccess fact (roles/debian/facts.py): who may write the directories
above the venv — judged from data, and the fact's shell text run for real on this machine's directories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from roles.debian.facts import VenvPathAccess
from roles.debian.path_access import PathAccess, PathEntry, venv_path_problem
from tests.support.venvs import root_only_dir


def _entry(path, uid=0, gid=0, mode=0o40755, user="root", group="root"):
    return PathEntry(path, uid, gid, mode, user, group)


def test_a_group_writable_directory_is_refused_only_when_someone_else_is_in_the_group():
    lab = _entry("/srv/lab", gid=1500, mode=0o42775, group="lab")
    mine = PathAccess(1001, (_entry("/"), _entry("/srv"), lab), {1500: frozenset({"alice"})}, "/srv/lab")
    assert venv_path_problem("/srv/lab/venv", "alice", mine) is None
    shared = PathAccess(1001, (_entry("/"), _entry("/srv"), lab), {1500: frozenset({"alice", "bob"})}, "/srv/lab")
    assert venv_path_problem("/srv/lab/venv", "alice", shared).startswith(
        "venv_path /srv/lab/venv: /srv/lab is writable by group lab (bob) — another account could swap the venv and "
        "have its code run as alice; use a venv_path whose directories only root and alice can write"
    )


def test_the_owners_directory_is_fine_and_makes_the_owner_create_the_venv():
    home = _entry("/home/alice", uid=1001, gid=1001, mode=0o40700, user="alice", group="alice")
    access = PathAccess(1001, (_entry("/"), _entry("/home"), home), {}, "/home/alice/envs")
    assert venv_path_problem("/home/alice/envs/venv", "alice", access) is None
    assert access.owner_makes_it()
    opt = PathAccess(1001, (_entry("/"), _entry("/opt")), {}, "/opt/rocm-fleet")
    assert not opt.owner_makes_it()


def run_fact(fact, **arguments):
    done = subprocess.run(["/bin/sh", "-c", fact.command(**arguments)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return fact.process(done.stdout.splitlines())


def _access(path: Path, owner: str = "root") -> str | None:
    return venv_path_problem(str(path), owner, run_fact(VenvPathAccess(), path=str(path), owner=owner))


@pytest.fixture
def root_dir():
    with root_only_dir() as made:
        assert _access(made / "venv") is None, "the checkout's directories are not root's alone"
        yield made


def test_venv_path_access_reads_both_chains(root_dir):
    link = root_dir / "link"
    (root_dir / "real" / "a").mkdir(parents=True)
    link.symlink_to(root_dir / "real")
    found = run_fact(VenvPathAccess(), path=str(link / "a" / "venv"), owner="root")
    assert found.owner_uid == 0 and found.resolved_parent == str(root_dir / "real" / "a")
    by_path = {entry.path: entry for entry in found.entries}
    assert by_path[str(link)].is_link  # the path as written, not followed
    assert {"/", str(root_dir), str(root_dir / "real"), str(root_dir / "real" / "a")} <= set(by_path)
    assert 0 in found.group_accounts and "root" in found.group_accounts[0]


def test_venv_path_writable_by_another_account_is_refused(root_dir):
    """A venv_path whose directories another account can write — owned by it, world-writable (sticky or
    not), or reached through a symlink into such a place — is refused; the owner's own directory is not."""
    other = root_dir / "other"
    (other / "deeper").mkdir(parents=True)
    os.chown(other, 65534, 65534)  # nobody's
    assert _access(other / "deeper" / "venv") == (
        f"venv_path {other}/deeper/venv: {other} is owned by nobody — another account could swap the venv and have "
        "its code run as root; use a venv_path whose directories only root can write (e.g. /opt/rocm-fleet/venv), "
        f"or fix {other} (chown root: / chmod go-w)"
    )
    shared = root_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert f"{shared} is writable by every account" in _access(shared / "venv")
    link = root_dir / "link"
    link.symlink_to(other / "deeper")
    assert f"{other} is owned by nobody" in _access(link / "venv")
    assert _access(other / "deeper" / "venv", owner="nobody") is None
