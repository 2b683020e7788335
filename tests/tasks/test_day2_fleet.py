"""After the install (issue 11), for real, over SSH on a local Debian 12 workstation logged in as an admin with sudo:
what later breaks the GPU, caught by the stage, the apt hook, the verification or the boot-time check.

The host gets ROCm from a STAND-IN of repo.radeon.com (tests/support/amd_mirror.py: AMD's layout, Origin, pin and
version strings; no AMD package can be fetched here) and Debian's own archive, the real torch 2.13.0 CPU wheel (the
STAND-IN for the ROCm wheel) and bitsandbytes 0.50.1 (in the venv the venv stage made for the session,
tests/support/venv_image.py; the stage runs here and finds it in place), then the apt hook and the boot check. Every
verification fails on the missing ROCm libraries (no real ROCm here), as designed: each test looks at the check it is
about.

- AMD's pin: effective (apt's candidates for rocminfo, hipcc, rocm-cmake, rocm-device-libs come from the mirror,
  though Debian's versions sort higher); removed by hand → the next verification fails apt.pin with the fix; the ROCm
  stage writes it again → passes again.
- Kernels: two STAND-IN kernel packages (linux-image-6.99.0-{1,2}-standin, built with tests/support/debs.py: a
  placeholder vmlinuz and, for the first only, a placeholder amdgpu.ko — no kernel in them) installed by a real
  apt-get: the hook's lines in apt's output, the WARNING for the second; the verification's kernel.next_boot; purged.
- An LD_LIBRARY_PATH line in /etc/environment: the verification names the binding that moved; removed → passes again.
- The boot check: the unit's command run by hand, as root over SSH, in the host's running boot — once, then "already
  checked this boot" (systemd itself starts the unit at boot in tests/tasks/test_booted_hosts.py); its result kept
  with the host's own boot id; the verification carries it; `boot_check: False` removes it.

The tests run in order on one host (each builds on the one before).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from pathlib import Path

import pytest

from roles.apt_hook.model import HOOK_PREFIX
from roles.boot_check.model import STATE_DIR, UNIT_PATH, WANTS_LINK
from tests.support.amd_mirror import PIN_FILE, build_mirror, serving
from tests.support.debs import build_deb
from tests.support.fleet_deploy import boot_unit_command, deploy, host_lines

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

VENV = "/opt/rocm-fleet/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
RUNNING = platform.release()  # a local test host (booted container or chroot) runs this machine's kernel


@pytest.fixture(scope="module")
def workstation(tmp_path_factory, venv_image):
    from localfleet.fleet import Fleet

    mirror = tmp_path_factory.mktemp("mirror") / "radeon"
    mirror.mkdir()
    reports = tmp_path_factory.mktemp("reports")
    with serving(mirror) as url:
        sha256 = build_mirror(mirror, url)
        data = {
            "rocm_install": "install",
            "min_free_disk_gb": 1,
            "repo_radeon_base_url": url,
            "amdgpu_install_sha256": sha256,
            "dpkg_lock_timeout": 120,
            "reports_dir": str(reports),
        }
        with Fleet.up(n=1, login="admin", data=data) as up:
            host = up.host("ws1")
            # A workstation has wget (Ubuntu and Debian install it); the minimal test root does not.
            host.run(["sh", "-c", "apt-get update -q && apt-get install -y -q wget"])
            venv_image.lend(host)
            for task in ("tasks/rocm.py", "tasks/venv.py", "tasks/apt_hook.py", "tasks/boot_check.py"):
                run = deploy(up.inventory, task)
                assert run.returncode == 0, (task, run.explain())
            yield up, host, reports


def verify(up, reports: Path) -> tuple[object, dict]:
    run = deploy(up.inventory, "tasks/verify.py")
    assert run.returncode == 1, run.explain()  # no ROCm libraries here: every report fails on linkage, by design
    return run, json.loads((reports / "ws1.json").read_text())


def check(report: dict, check_id: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check_id)


def apt(host, *arguments: str) -> tuple[list[str], str]:
    """apt-get as the admin runs it (over SSH, with sudo): the hook's lines and all output."""
    done = host.ssh(["sudo", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", *arguments], check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return [line for line in output.splitlines() if line.startswith(HOOK_PREFIX)], output


# --- AMD's pin -------------------------------------------------------------------------------------------------------


def test_amds_pin_removed_by_hand_fails_the_next_verification_with_the_fix_and_the_rocm_stage_restores_it(workstation):
    up, host, reports = workstation
    _, report = verify(up, reports)
    assert check(report, "apt.pin")["status"] == "pass", check(report, "apt.pin")
    assert check(report, "apt.pin")["reason"] == (
        f"AMD's pin {PIN_FILE} (600) is effective: apt's candidates for rocminfo, hipcc, rocm-cmake, rocm-device-libs "
        "come from repo.radeon.com"
    )
    assert check(report, "apt.lists")["status"] == "pass"

    host.ssh(["sudo", "rm", PIN_FILE])
    run, report = verify(up, reports)
    pin = check(report, "apt.pin")
    assert pin["status"] == "fail"
    # Debian 12's own rocminfo 5.2.3-2 sorts above AMD's 1.0.0.70204-93~22.04: without the pin it is apt's candidate.
    assert pin["reason"].startswith(
        "AMD's pin is missing (no /etc/apt/preferences.d/repo-radeon-pin-600 or /etc/apt/preferences.d/rocm-pin-600 "
        "pinning o=repo.radeon.com above 500): an upgrade can replace AMD's packages with the distribution's (apt's "
        "candidate for rocminfo is 5.2.3-2 (priority 500, from http://"
    )
    assert pin["reason"].endswith(
        "restore it: pyinfra INVENTORY tasks/rocm.py (it writes /etc/apt/preferences.d/repo-radeon-pin-600: "
        "Package: * / Pin: release o=repo.radeon.com / Pin-Priority: 600)"
    )
    assert report["facts"]["apt_pin"]["status"] == "fail"
    assert any(
        line.startswith("DRIFT worse since") and "apt.pin: pass → fail" in line for line in host_lines(run.log, "ws1")
    ), run.explain()

    run = deploy(up.inventory, "tasks/rocm.py")
    assert run.returncode == 0, run.explain()
    assert "ROCm | AMD's apt pin (o=repo.radeon.com, 600)" in run.changed_operations, run.explain()
    assert (host.root / PIN_FILE.lstrip("/")).read_text() == (
        "Package: *\nPin: release o=repo.radeon.com\nPin-Priority: 600\n"
    )
    _, report = verify(up, reports)
    assert check(report, "apt.pin")["status"] == "pass"


# --- kernels ---------------------------------------------------------------------------------------------------------


def _kernel_deb(tmp_path: Path, release: str, amdgpu: bool) -> Path:
    """A STAND-IN kernel package: a placeholder image and modules directory, with or without a placeholder amdgpu.ko."""
    files = {
        f"/boot/vmlinuz-{release}": b"STAND-IN kernel image (tests only)\n",
        f"/lib/modules/{release}/modules.order": b"",
    }
    if amdgpu:
        files[f"/lib/modules/{release}/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"] = b"STAND-IN amdgpu module\n"
    version = release.split("-standin")[0]
    return build_deb(
        tmp_path,
        {
            "Package": f"linux-image-{release}",
            "Version": version,
            "Description": "STAND-IN kernel package (tests only: no kernel in it)",
        },
        files,
    )


def test_kernels_installed_by_apt_the_hook_warns_for_the_one_without_amdgpu(workstation, tmp_path):
    up, host, reports = workstation
    good, bad = "6.99.0-1-standin", "6.99.0-2-standin"
    for release, amdgpu in ((good, True), (bad, False)):
        deb = _kernel_deb(tmp_path, release, amdgpu)
        (host.root / "tmp" / deb.name).write_bytes(deb.read_bytes())

    hook, output = apt(host, "install", f"/tmp/linux-image-{good}_6.99.0-1_amd64.deb")
    assert hook == [
        f"{HOOK_PREFIX} changed by this dpkg run: kernel {good} was installed (amdgpu.ko present) (check now FAIL)",
        f"{HOOK_PREFIX} reboot pending: the next boot runs {good} (amdgpu.ko present; {RUNNING} runs now)",
    ], output[-3000:]

    hook, output = apt(host, "install", f"/tmp/linux-image-{bad}_6.99.0-2_amd64.deb")
    assert hook[:2] == [
        f"{HOOK_PREFIX} WARNING: this dpkg run made the ROCm setup of {VENV} worse (check now FAIL):",
        f"{HOOK_PREFIX}   worse: kernel {bad} was installed without amdgpu.ko: it boots next — after the next reboot "
        "the GPU is gone",
    ], output[-3000:]
    assert hook[-1] == (
        f"{HOOK_PREFIX} reboot pending: the next boot runs {bad} (NO amdgpu.ko: the GPU is gone after "
        f"that reboot; {RUNNING} runs now)"
    )

    run, report = verify(up, reports)
    next_boot = check(report, "kernel.next_boot")
    assert next_boot["status"] == "warn"
    assert next_boot["reason"].startswith(
        f"after the next reboot the GPU is gone: {bad} (the newest installed kernel, which boots next) has no amdgpu.ko"
    )
    assert report["facts"]["kernel"]["installed"] == [good, bad]
    assert report["facts"]["kernel"]["without_amdgpu"] == [bad]
    assert any(f"kernel {bad} was installed without amdgpu.ko" in line for line in host_lines(run.log, "ws1"))

    hook, output = apt(host, "purge", f"linux-image-{good}", f"linux-image-{bad}")
    assert hook == [
        f"{HOOK_PREFIX} changed by this dpkg run: kernel {good} was removed; kernel {bad} was removed (check now FAIL)"
    ], output[-3000:]
    _, report = verify(up, reports)
    assert check(report, "kernel.next_boot")["status"] == "skip"  # no kernel installed in the test host


# --- the loader environment of a login -------------------------------------------------------------------------------


def test_an_ld_library_path_line_in_etc_environment_names_the_binding_that_moved(workstation):
    up, host, reports = workstation
    # A copy of torch's own libc10.so where the line points (a STAND-IN for what a ROCm install puts in /opt/rocm/lib):
    # the CPU wheel's libraries search RUNPATH $ORIGIN, which LD_LIBRARY_PATH comes before (pytorch/builder#1468).
    lib = host.root / "opt/rocm-7.2.4/lib"
    lib.mkdir(exist_ok=True)
    shutil.copy2(host.root / f"{SITE.lstrip('/')}/torch/lib/libc10.so", lib / "libc10.so")
    environment = host.root / "etc/environment"
    original = environment.read_text() if environment.exists() else ""
    environment.write_text(original + 'LD_LIBRARY_PATH="/opt/rocm/lib"\n')
    try:
        run, report = verify(up, reports)
        loader = check(report, "environment.loader")
        line = len(original.splitlines()) + 1
        assert loader["status"] == "warn", loader
        assert loader["reason"].startswith(
            f"LD_LIBRARY_PATH=/opt/rocm/lib (/etc/environment:{line}) moves libc10.so → "
            "/opt/rocm-7.2.4/lib/libc10.so "
            f"(was {SITE}/torch/lib/libc10.so)"
        ), loader["reason"]
        assert any("environment.loader: pass → warn" in text for text in host_lines(run.log, "ws1")), run.explain()
    finally:
        environment.write_text(original)
        (lib / "libc10.so").unlink()
    _, report = verify(up, reports)
    assert check(report, "environment.loader")["status"] == "pass"


# --- the boot-time check ---------------------------------------------------------------------------------------------


def test_the_boot_units_command_once_per_boot_and_its_result_in_the_verification(workstation):
    up, host, reports = workstation
    assert (host.root / WANTS_LINK.lstrip("/")).is_symlink()
    command = boot_unit_command(host.root)
    assert command.startswith('/bin/sh -c "if echo ') and (
        "then /usr/bin/python3 -I -S /var/lib/rocm-fleet/verifier/launcher.py boot-check --venv /opt/rocm-fleet/venv"
        in command
    )
    # The unit's command, run by hand as root (sh reads systemd's quoting alike): the installed verifier's current
    # version, its launcher checked first.
    first = host.ssh(["sudo", "sh", "-c", command], check=False)
    assert first.returncode == 1, first.stdout + first.stderr  # the check fails (no ROCm libraries), and says so
    assert first.stdout.startswith(f"rocm-fleet boot check: {RUNNING}: FAIL — linkage.static: libhipblas.so.3")
    kept = json.loads((host.root / STATE_DIR.lstrip("/") / "last.json").read_text())
    this_boot = host.boot_id()  # read in the host: a booted host's own (a chroot's would be this machine's)
    assert (kept["boot_id"], kept["kernel"], kept["report"]["request"]["static_only"]) == (this_boot, RUNNING, False)
    again = host.ssh(["sudo", "sh", "-c", command], check=False)
    assert again.stdout.startswith(f"rocm-fleet boot check: already checked this boot ({RUNNING}, ")

    _, report = verify(up, reports)
    assert report["facts"]["boot_check"] == {
        "boot_id": this_boot,
        "kernel": RUNNING,
        "checked_at": kept["checked_at"],
        "verdict": "fail",
        "reason": kept["report"]["reason"],
        "previous_kernel": None,
    }

    run = deploy(up.inventory, "tasks/boot_check.py", "boot_check=false")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == ["Boot check | Remove the boot-time check (boot_check: False)"], run.explain()
    assert not (host.root / UNIT_PATH.lstrip("/")).exists() and not (host.root / STATE_DIR.lstrip("/")).exists()
    assert not os.path.lexists(host.root / WANTS_LINK.lstrip("/"))
