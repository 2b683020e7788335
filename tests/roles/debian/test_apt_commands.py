"""roles/debian/apt_commands.py: the wrapper that gives apt (and amdgpu-install's apt) a bounded wait for the dpkg lock,
run for real with sh, and with this machine's real apt-get against real fcntl locks held in private state directories
(so this machine's own apt state is never touched). The lock held inside a fleet host during a real deploy is in
tests/tasks/test_real_fleet.py and tests/e2e/test_dpkg_lock.py; a dpkg run really killed halfway on a fleet host, met
by the ROCm stage, in tests/tasks/test_interrupted_dpkg.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
from pathlib import Path

import pytest

from roles.debian.apt_commands import apt_get, interrupted_message, lock_expired_message, with_dpkg_lock_timeout


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
    done = _sh(
        with_dpkg_lock_timeout(
            "echo 'E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)' >&2; exit "
            "100",
            5,
        )
    )
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
    return (
        f"apt-get -q update -o Dir::State::Lists={lists} -o Dir::Etc::SourceList=/dev/null "
        "-o Dir::Etc::SourceParts=/nonexistent"
    )


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


def _dpkg_state(directory: Path) -> Path:
    """A private dpkg state directory (a copy of this machine's status file): apt takes its dpkg locks here."""
    directory.mkdir()
    status = directory / "status"
    status.write_bytes(Path("/var/lib/dpkg/status").read_bytes())
    return status


def _apt_install(status: Path, quiet: str) -> str:
    # Installing from a private dpkg state; no cache files written. apt takes the dpkg locks before anything else,
    # and changes nothing when it cannot.
    return (
        f"apt-get {quiet} -y -o Dir::State::status={status} -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= "
        "install --no-download hello"
    )


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="apt-get install wants root")


@needs_root
@pytest.mark.parametrize("quiet", ["-q", "-qq"], ids=["progress-maybe", "no-progress-lines"])
def test_a_dpkg_lock_apt_waited_for_in_vain_is_recognised_by_its_last_error_line(tmp_path, quiet):
    """apt waits (DPkg::Lock::Timeout), then fails with "Unable to acquire the dpkg frontend lock (…), is another
    process using it?". With -qq apt prints no "Waiting for cache lock: Could not get lock …" progress lines — the
    output CI got from a plain `apt-get -y install` through a pipe (apt 2.6 prints those lines only when an
    uninitialised flag is set)."""
    status = _dpkg_state(tmp_path / "dpkg")
    holders = [_hold(status.parent / "lock-frontend"), _hold(status.parent / "lock")]
    try:
        done = _sh(with_dpkg_lock_timeout(_apt_install(status, quiet), 2))
    finally:
        for holder in holders:
            os.close(holder)
    assert done.returncode == 100
    assert f"Unable to acquire the dpkg frontend lock ({status.parent}/lock-frontend)" in done.stdout, done.stdout
    if quiet == "-qq":
        assert "Could not get lock" not in done.stdout  # only the last line is left to recognise
    assert done.stderr.strip() == lock_expired_message(2)


@needs_root
def test_the_inner_dpkg_lock_alone_is_recognised_too(tmp_path):
    """dpkg run by another frontend holds only /var/lib/dpkg/lock: apt fails on "Unable to lock the administration
    directory (…), is another process using it?"."""
    status = _dpkg_state(tmp_path / "dpkg")
    holder = _hold(status.parent / "lock")
    try:
        done = _sh(with_dpkg_lock_timeout(_apt_install(status, "-qq"), 1))
    finally:
        os.close(holder)
    assert done.returncode == 100
    assert f"Unable to lock the administration directory ({status.parent}/)" in done.stdout, done.stdout
    assert done.stderr.strip() == lock_expired_message(1)


@needs_root
def test_a_lock_is_recognised_on_a_workstation_whose_apt_speaks_german(tmp_path):
    """LANGUAGE=de, as a German workstation's /etc/default/locale sets it for SSH logins: the wrapper runs apt in
    English (LC_ALL=C.UTF-8, no LANGUAGE), so its lock lines are still recognised."""
    status = _dpkg_state(tmp_path / "dpkg")
    german = dict(os.environ, LANGUAGE="de", LANG="C.UTF-8")
    probe = subprocess.run(
        ["apt-get", "-qq", "install", "--no-download", "no-such-package-here"],
        capture_output=True,
        text=True,
        env=german,
    )
    if "Paket" not in probe.stderr:
        pytest.skip(f"apt has no German messages on this machine (it said {probe.stderr.strip()!r})")
    holder = _hold(status.parent / "lock-frontend")
    try:
        done = subprocess.run(
            ["sh", "-c", with_dpkg_lock_timeout(_apt_install(status, "-qq"), 1)],
            capture_output=True,
            text=True,
            env=german,
        )
    finally:
        os.close(holder)
    assert done.returncode == 100
    assert "Unable to acquire the dpkg frontend lock" in done.stdout, done.stdout
    assert done.stderr.strip() == lock_expired_message(1)


@needs_root
def test_an_interrupted_dpkg_run_adds_one_line_naming_the_fix(tmp_path):
    """A private dpkg state whose journal (updates/) holds an entry, as dpkg leaves it when it is killed halfway
    (the entry's content is what dpkg wrote for a half-configured package; apt only looks for the file)."""
    status = _dpkg_state(tmp_path / "dpkg")
    (status.parent / "updates").mkdir()
    (status.parent / "updates" / "0004").write_text(
        "Package: rocm-fleet-test\nStatus: install ok half-configured\nArchitecture: all\nVersion: 1.0\n\n"
    )
    done = _sh(with_dpkg_lock_timeout(_apt_install(status, "-qq"), 5))
    assert done.returncode == 100
    assert "E: dpkg was interrupted, you must manually run 'dpkg --configure -a' to correct the problem." in done.stdout
    assert done.stderr.strip() == interrupted_message()
    assert "dpkg --configure -a" in done.stderr and "pyinfra INVENTORY exec" in done.stderr


def test_other_failures_get_no_extra_line():
    done = _sh(with_dpkg_lock_timeout("echo 'E: Unable to locate package rocm' >&2; exit 100", 5))
    assert (done.returncode, done.stderr) == (100, "")
