"""Stages 1-3 for real: the task files run by the real pyinfra CLI over real SSH against a local Debian 12 workstation
(localfleet), logged in as an admin account with sudo as real fleets are. The distro ROCm packages are really installed
by apt from Debian's archive; a tiny local package that depends on one of them plays a user's tool.

What cannot be real here is AMD's side (repo.radeon.com, a GPU): the ROCm stage runs with `rocm_install: skip`, and
once against a stand-in tree of another release (/opt/rocm-6.4.1 with only its .info/version), named as such.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from roles.debian.apt_commands import lock_expired_message
from tests.support.debs import build_deb
from tests.support.fleet_deploy import deploy, host_lines

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

DISTRO_ROCM = ("rocminfo", "rocm-cmake", "rocm-device-libs")  # Debian 12: 5.2.3-2, 5.4.0-1, 5.2.3-2


def _sh(up, command: str) -> str:
    """`command` as root in ws1 itself, as its admin would run it there (a booted host: among its own processes)."""
    done = up.host("ws1").run(["sh", "-c", command], check=False)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from localfleet.fleet import Fleet

    with Fleet.up(
        n=1, login="admin", data={"rocm_install": "install", "min_free_disk_gb": 1, "workstation_users": ["maria"]}
    ) as up:
        root = Path(up.host_state("ws1").root)
        _sh(up, "apt-get update -q && apt-get install -y -q " + " ".join(DISTRO_ROCM))
        tool = build_deb(
            tmp_path_factory.mktemp("debs"),
            {"Package": "lab-rocm-tools", "Version": "1.0", "Architecture": "all", "Depends": "rocminfo"},
        )
        (root / "tmp" / tool.name).write_bytes(tool.read_bytes())
        _sh(up, f"dpkg -i /tmp/{tool.name} && groupadd lab && useradd -m -G lab maria")
        yield up, root


def _installed(up) -> dict[str, str]:
    out = _sh(
        up,
        "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' "
        + " ".join(DISTRO_ROCM)
        + " lab-rocm-tools 2>/dev/null || true",
    )
    return {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}


def test_preflight_passes_on_a_fit_host(fleet):
    up, _ = fleet
    run = deploy(up.inventory, "tasks/preflight.py")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == [] and run.results["failed_hosts"] == [], run.explain()


def test_preflight_stops_an_unfit_host_with_one_line(fleet):
    up, _ = fleet
    run = deploy(up.inventory, "tasks/preflight.py", "gpu_required=true", 'workstation_users=["maria","ghost"]')
    assert run.returncode == 1, run.explain()
    # The fleet's only host failed, so pyinfra ends with "No hosts remaining!" and prints no JSON results.
    assert "No hosts remaining" in run.log, run.explain()
    reasons = [line for line in host_lines(run.log, "ws1") if "preflight:" in line]
    assert reasons == [
        "preflight: no AMD GPU found (no PCI display or accelerator device of vendor 0x1002): install one, or "
        "set gpu_required: False for a host without a GPU; user(s) ghost do not exist (workstation_users / "
        "venv_owner): create them, or fix the inventory"
    ], run.explain()


def test_colliding_packages_stop_policy_changes_nothing(fleet):
    up, root = fleet
    before = _installed(up)
    run = deploy(up.inventory, "tasks/colliding_packages.py", "colliding_packages=stop")
    assert run.returncode == 1, run.explain()
    [reason] = [line for line in host_lines(run.log, "ws1") if "colliding packages:" in line]
    assert reason == (
        "colliding packages: rocminfo 5.2.3-2 (distro; sorts above AMD's 1.0.0.70204), rocm-cmake 5.4.0-1 "
        "(distro; sorts above AMD's 0.14.0.70204), rocm-device-libs 5.2.3-2 (distro; sorts above AMD's 1.0.0.70204) "
        "would block amdgpu-install (ROCm #3656, #6367); colliding_packages is 'stop': remove them (sudo apt-get "
        "remove rocminfo rocm-cmake rocm-device-libs) or set colliding_packages: remove"
    ), run.explain()
    assert _installed(up) == before


def test_held_dpkg_lock_waits_then_fails_saying_so(fleet):
    up, root = fleet
    lock_path = root / "var/lib/dpkg/lock-frontend"
    holder = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        # The same kind of lock apt takes (fcntl), on the same file: for the host's apt, another package run is busy.
        fcntl.lockf(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run = deploy(up.inventory, "tasks/colliding_packages.py", "dpkg_lock_timeout=2")
    finally:
        os.close(holder)
    assert run.returncode == 1, run.explain()
    assert lock_expired_message(2) in host_lines(run.log, "ws1"), run.explain()
    # apt's own words, naming the file (its last error line: the only one it prints for sure after a wait)
    assert "Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)" in run.log, run.explain()
    assert _installed(up)["rocminfo"] == "ii"


def test_colliding_packages_removed_saying_why_and_what_goes_with_them(fleet):
    up, root = fleet
    run = deploy(up.inventory, "tasks/colliding_packages.py")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == ["Colliding packages | Remove distro packages that block amdgpu-install"], (
        run.explain()
    )
    assert (
        "removing rocminfo 5.2.3-2 (distro; sorts above AMD's 1.0.0.70204), rocm-cmake 5.4.0-1 (distro; "
        "sorts above AMD's 0.14.0.70204), rocm-device-libs 5.2.3-2 (distro; sorts above AMD's 1.0.0.70204): apt "
        "would keep them and amdgpu-install would fail with unmet dependencies (ROCm #3656, #6367); apt also "
        "removes what depends on them: lab-rocm-tools 1.0"
    ) in host_lines(run.log, "ws1"), run.explain()
    after = _installed(up)
    assert all(after.get(name, "rc")[1] in "cn" for name in (*DISTRO_ROCM, "lab-rocm-tools")), after


def test_second_run_of_preflight_and_colliding_packages_changes_nothing(fleet):
    up, _ = fleet
    for task in ("tasks/preflight.py", "tasks/colliding_packages.py"):
        run = deploy(up.inventory, task)
        assert run.returncode == 0, run.explain()
        # results {} would mean pyinfra printed no JSON at all, not that nothing changed.
        assert run.results and run.changed_operations == [], f"{task}: {run.explain()}"


def test_gpu_groups_appended_with_rocm_managed_elsewhere(fleet):
    up, root = fleet
    run = deploy(up.inventory, "tasks/rocm.py", "rocm_install=skip")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == [
        "GPU access | workstation_users in render and video",
        "GPU access | New accounts join render and video (/etc/adduser.conf)",
    ], run.explain()
    assert set(_sh(up, "id -nG maria").split()) == {"maria", "lab", "render", "video"}
    # An account made later with Debian's own adduser joins them too (ADD_EXTRA_GROUPS=1, EXTRA_GROUPS; issue 11).
    assert set(
        _sh(up, "adduser --quiet --disabled-password --gecos '' newcomer >/dev/null && id -nG newcomer").split()
    ) == {"newcomer", "users", "render", "video"}
    _sh(up, "deluser --quiet newcomer && rm -rf /home/newcomer")
    run = deploy(up.inventory, "tasks/rocm.py", "rocm_install=skip")
    # results {} would mean pyinfra printed no JSON at all, not that nothing changed.
    assert run.returncode == 0 and run.results and run.changed_operations == [], run.explain()


def test_rocm_stage_stops_beside_another_release(fleet):
    """Stand-in: /opt/rocm-6.4.1 holds only its .info/version (no AMD packages exist here)."""
    up, root = fleet
    (root / "opt/rocm-6.4.1/.info").mkdir(parents=True)
    (root / "opt/rocm-6.4.1/.info/version").write_text("6.4.1-83\n")
    try:
        run = deploy(up.inventory, "tasks/rocm.py")
        assert run.returncode == 1, run.explain()
        assert (
            "ROCm: another ROCm release is installed: 6.4.1 (/opt/rocm-6.4.1); rocm_other_release is "
            "'stop': uninstall it (sudo amdgpu-install --uninstall --rocmrelease=all) or set rocm_other_release: "
            "side-by-side"
        ) in host_lines(run.log, "ws1"), run.explain()
        assert not (root / "var/cache/rocm-fleet").exists(), "nothing may be downloaded for a stopped host"
    finally:
        subprocess.run(["rm", "-rf", str(root / "opt/rocm-6.4.1")], check=True)
