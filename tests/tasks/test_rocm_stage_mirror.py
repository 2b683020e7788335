"""The ROCm stage for real against a stand-in of repo.radeon.com (tests/support/amd_mirror.py: AMD's layout, names
and versions; the packages are labelled stand-ins, as no AMD package can be fetched here), on a local Debian 12
workstation over SSH with sudo. Real: the checksum-checked download, apt installing the installer deb, the apt lists
it wrote being found wrong and rewritten, `apt-get update`, amdgpu-install (a stand-in script) installing `rocm` with
apt — waiting for the dpkg lock through APT_CONFIG — /opt/rocm registered through update-alternatives, render/video,
and a second run that changes nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.amd_mirror import build_mirror, serving

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (chroots, mounts, sshd)")]

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
DEB = "/var/cache/rocm-fleet/amdgpu-install_7.2.4.70204-1_all.deb"


def _chroot(root: Path, command: str) -> str:
    done = subprocess.run(["chroot", str(root), "sh", "-c", command], capture_output=True, text=True,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"})
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def workstation(tmp_path_factory):
    from localfleet.fleet import Fleet

    mirror = tmp_path_factory.mktemp("mirror") / "radeon"
    mirror.mkdir()
    with serving(mirror) as url:
        sha256 = build_mirror(mirror, url)
        data = {"rocm_install": "install", "min_free_disk_gb": 1, "repo_radeon_base_url": url,
                "amdgpu_install_sha256": sha256, "workstation_users": ["maria"], "dpkg_lock_timeout": 120}
        with Fleet.up(n=1, login="admin", data=data) as up:
            root = Path(up.host_state("ws1").root)
            # A workstation has wget (Ubuntu and Debian install it); the minimal test root does not.
            _chroot(root, "apt-get update -q && apt-get install -y -q wget && useradd -m maria")
            yield up, root, url


def _pyinfra(workstation, *data: str) -> tuple[int, dict | None, str]:
    up, _, _ = workstation
    argv = [PYINFRA, str(up.inventory), "tasks/rocm.py", "-y", "--json"]
    for item in data:
        argv += ["--data", item]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root", "PYINFRA_PROGRESS": "off"})
    try:
        results = json.loads(done.stdout)["results"]
    except (ValueError, KeyError, TypeError):
        results = None
    return done.returncode, results, done.stderr


def _changed(results: dict) -> list[str]:
    return [op["name"] for op in results["operations"] if op["success"]]


def _host_lines(stderr: str) -> list[str]:
    return [re.sub(r"^\[ws1\]\s+", "[ws1] ", line.strip()) for line in stderr.splitlines()
            if line.strip().startswith("[ws1]")]


def test_wrong_checksum_stops_before_anything_is_installed(workstation):
    _, root, _ = workstation
    code, _, stderr = _pyinfra(workstation, "amdgpu_install_sha256=" + "f" * 64)
    assert code == 1
    assert "SHA256 did not match!" in stderr
    assert _chroot(root, "dpkg-query -W -f='${db:Status-Abbrev}' amdgpu-install 2>/dev/null || true").strip() in ("", "un")
    assert not (root / "opt/rocm-7.2.4").exists()


def test_first_run_installs_rocm_and_fixes_the_lists(workstation):
    _, root, url = workstation
    code, results, stderr = _pyinfra(workstation)
    assert code == 0, stderr[-3000:]
    # No download: the file the last run fetched is the right one (only the checksum it was given was wrong).
    assert _changed(results) == [
        "ROCm | Install amdgpu-install 7.2.4.70204-1",
        "ROCm | Check AMD's apt lists",
        "ROCm | amdgpu-install --usecase=rocm --no-dkms (ROCm 7.2.4)",
        "GPU access | workstation_users in render and video",
    ]
    assert (f"[ws1] fixing AMD's apt lists: /etc/apt/sources.list.d/rocm.list: unexpected {url}/graphics/7.2.1/ubuntu "
            f"jammy, {url}/rocm/apt/7.2.1 jammy; lacks {url}/graphics/7.2.4/ubuntu jammy, {url}/rocm/apt/7.2.4 jammy"
            ) in _host_lines(stderr)
    assert (root / "etc/apt/sources.list.d/rocm.list").read_text().splitlines()[1:] == [
        f"deb [arch=amd64 trusted=yes] {url}/rocm/apt/7.2.4 jammy main",
        f"deb [arch=amd64 trusted=yes] {url}/graphics/7.2.4/ubuntu jammy main"]
    # amdgpu-install got exactly these flags, and the apt-get it ran waited for the lock as configured.
    assert (root / "var/log/amdgpu-install-standin.args").read_text().splitlines() == [
        "-y --usecase=rocm --no-dkms", 'DPkg::Lock::Timeout "120";']
    assert _chroot(root, "readlink -e /opt/rocm").strip() == "/opt/rocm-7.2.4"
    assert _chroot(root, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' rocm rocm-core").split(
        "\n")[:2] == ["rocm 7.2.4.70204-93~22.04 ii ", "rocm-core 7.2.4.70204-93~22.04 ii "]
    assert {"render", "video"} <= set(_chroot(root, "id -nG maria").split())


def test_second_run_changes_nothing(workstation):
    code, results, stderr = _pyinfra(workstation)
    assert code == 0, stderr[-3000:]
    assert _changed(results) == []


def test_opt_rocm_moved_back_when_pointed_elsewhere(workstation):
    """Another release registered as the /opt/rocm alternative (a stand-in directory) and selected by hand."""
    _, root, _ = workstation
    _chroot(root, "mkdir -p /opt/rocm-6.4.1/.info && echo 6.4.1-83 > /opt/rocm-6.4.1/.info/version && "
                  "update-alternatives --install /opt/rocm rocm /opt/rocm-6.4.1 60401 && "
                  "update-alternatives --set rocm /opt/rocm-6.4.1")
    try:
        code, results, stderr = _pyinfra(workstation)
        assert code == 0, stderr[-3000:]
        assert _changed(results) == ["ROCm | /opt/rocm -> /opt/rocm-7.2.4"]
        assert _chroot(root, "readlink -e /opt/rocm").strip() == "/opt/rocm-7.2.4"
    finally:
        _chroot(root, "update-alternatives --remove rocm /opt/rocm-6.4.1; rm -rf /opt/rocm-6.4.1")
