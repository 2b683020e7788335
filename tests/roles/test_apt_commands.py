"""roles/apt_commands.py: the wrapper that gives apt (and amdgpu-install's apt) a bounded wait for the dpkg lock,
run for real with sh. The real lock held by a real process is in tests/roles/colliding_packages/test_real_runs.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
from pathlib import Path

import pytest

from roles.apt_commands import apt_get, lock_expired_message, with_dpkg_lock_timeout


def _sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True)


def test_apt_sees_the_lock_timeout_through_apt_config():
    # apt-config reads the same configuration files apt-get does, APT_CONFIG included.
    done = _sh(with_dpkg_lock_timeout("apt-config dump DPkg::Lock::Timeout", 42))
    assert done.returncode == 0, done.stderr
    assert 'DPkg::Lock::Timeout "42";' in done.stdout


def test_inner_commands_all_see_it_and_exit_status_is_kept():
    done = _sh(with_dpkg_lock_timeout("true && apt-config dump DPkg::Lock::Timeout && exit 3", 7))
    assert done.returncode == 3
    assert 'DPkg::Lock::Timeout "7";' in done.stdout
    assert done.stderr == ""  # not a lock failure: no extra line


def test_a_lock_failure_adds_one_line_naming_the_timeout():
    done = _sh(with_dpkg_lock_timeout(
        "echo 'E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)' >&2; exit 100",
        5))
    assert done.returncode == 100
    assert "It is held by process 4242" in done.stdout  # apt's own words are kept
    assert done.stderr.strip() == lock_expired_message(5)
    assert "dpkg_lock_timeout" in done.stderr


def test_temporary_files_are_removed():
    done = _sh(with_dpkg_lock_timeout('echo "$APT_CONFIG"', 1))
    path = done.stdout.strip()
    assert path.startswith("/") and _sh(f"test -e {path}").returncode == 1


def test_apt_get_is_non_interactive_and_keeps_changed_config_files():
    command = apt_get("remove foo", 300)
    for part in ("DEBIAN_FRONTEND=noninteractive", "apt-get -y", "--force-confdef", "--force-confold", "remove foo"):
        assert part in command


def _apt_update(lists: Path) -> str:
    # apt-get update on a private, empty lists directory: its lock is the one a concurrent `apt-get update` holds.
    return (f"apt-get -q update -o Dir::State::Lists={lists} -o Dir::Etc::SourceList=/dev/null "
            "-o Dir::Etc::SourceParts=/nonexistent")


def _hold(lock: Path) -> int:
    holder = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # apt's kind of lock (fcntl), as another apt would hold it
    return holder


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get update wants root even on a private lists directory")
def test_update_blocked_by_the_lists_lock_retries_until_the_timeout(tmp_path):
    """apt-get update does not wait for its lock (DPkg::Lock::Timeout covers only dpkg's): the wrapper retries."""
    (tmp_path / "partial").mkdir()
    holder = _hold(tmp_path / "lock")
    try:
        done = _sh(with_dpkg_lock_timeout(_apt_update(tmp_path), 2))
    finally:
        os.close(holder)
    assert done.returncode == 100
    assert "Could not get lock" in done.stdout
    assert done.stderr.strip() == lock_expired_message(2)


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get update wants root even on a private lists directory")
def test_update_goes_on_once_the_lock_is_released(tmp_path):
    (tmp_path / "partial").mkdir()
    holder = _hold(tmp_path / "lock")
    release = threading.Timer(1, os.close, (holder,))
    release.start()
    try:
        done = _sh(with_dpkg_lock_timeout(_apt_update(tmp_path), 60))
    finally:
        release.join()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
