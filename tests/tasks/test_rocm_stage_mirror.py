"""The ROCm stage for real against a stand-in of repo.radeon.com (tests/support/amd_mirror.py: AMD's layout, names
and versions; the packages are labelled stand-ins, as no AMD package can be fetched here), on a local Debian 12
workstation over SSH with sudo. Real: the checksum-checked download, apt installing the installer deb, the apt lists
it wrote being found wrong and rewritten, `apt-get update`, amdgpu-install (a stand-in script) installing `rocm` with
apt — waiting for the dpkg lock through APT_CONFIG — /opt/rocm registered through update-alternatives, render/video,
and a second run that changes nothing. The mirror is plain http, as a lab mirror may be: apt checks its signed
indexes with the keyring the installer deb brought, and a list that would switch that off is rewritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyinfra.api.util import sha1_hash

from tests.support.amd_mirror import Signer, build_deb, build_mirror, repository, rocm_core_scripts, serving
from tests.support.fleet_deploy import deploy, host_lines

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

DEB = "/var/cache/rocm-fleet/amdgpu-install_7.2.4.70204-1_all.deb"


def _sh(up, command: str, host: str = "ws1") -> str:
    """`command` as root in the workstation itself, as its admin would run it there (a booted host: among its own
    processes)."""
    done = up.host(host).run(["sh", "-c", command], check=False)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def workstation(tmp_path_factory):
    from localfleet.fleet import Fleet

    mirror = tmp_path_factory.mktemp("mirror") / "radeon"
    mirror.mkdir()
    with serving(mirror) as url:
        sha256 = build_mirror(mirror, url)
        data = {
            "rocm_install": "install",
            "min_free_disk_gb": 1,
            "repo_radeon_base_url": url,
            "amdgpu_install_sha256": sha256,
            "workstation_users": ["maria"],
            "dpkg_lock_timeout": 120,
        }
        with Fleet.up(n=2, login="admin", data=data) as up:
            for name in ("ws1", "ws2"):
                # A workstation has wget (Ubuntu and Debian install it); the minimal test root does not.
                _sh(up, "apt-get update -q && apt-get install -y -q wget && useradd -m maria", name)
            _install_rocm_6_4_multi_version(up, tmp_path_factory.mktemp("debs"))
            yield up, Path(up.host_state("ws1").root), url, mirror


def _install_rocm_6_4_multi_version(up, workdir: Path) -> None:
    """ws2 already has ROCm 6.4.1 as a multi-version install (stand-ins of rocm-core6.4.1 and rocm6.4.1)."""
    version = "6.4.1.60401-83~22.04"
    core = build_deb(
        workdir,
        {"Package": "rocm-core6.4.1", "Version": version},
        {"/opt/rocm-6.4.1/.info/version": "6.4.1-83\n"},
        rocm_core_scripts("6.4.1", "60401"),
    )
    meta = build_deb(workdir, {"Package": "rocm6.4.1", "Version": version, "Depends": f"rocm-core6.4.1 (= {version})"})
    for deb in (core, meta):
        (up.host("ws2").root / "tmp" / deb.name).write_bytes(deb.read_bytes())
    _sh(up, f"dpkg -i /tmp/{core.name} /tmp/{meta.name}", "ws2")


def test_wrong_checksum_stops_before_anything_is_installed(workstation):
    """Also issue 9: maria, an ordinary account, has planted pyinfra's default temporary name for the download
    (/tmp/pyinfra-<sha1 of the destination>) as a symlink to a file of root's. Root's curl must not write through it
    (with fs.protected_symlinks=0 it would overwrite that file; with 1 the download would fail): the download is
    staged in root's own /var/cache/rocm-fleet, and maria's name is never used."""
    up, root, _, _ = workstation
    victim = root / "etc/rocm-fleet-test-victim"
    victim.write_text("root's own\n")
    planted = root / "tmp" / f"pyinfra-{sha1_hash(DEB)}"
    planted.symlink_to("/etc/rocm-fleet-test-victim")
    maria = int(_sh(up, "id -u maria"))
    os.lchown(planted, maria, maria)
    try:
        run = deploy(up.inventory, "tasks/rocm.py", "amdgpu_install_sha256=" + "f" * 64, limit="ws1")
        assert victim.read_bytes() == b"root's own\n", "root's download wrote through a name another account planted"
        assert planted.is_symlink() and os.readlink(planted) == "/etc/rocm-fleet-test-victim"
    finally:
        planted.unlink(missing_ok=True)
        victim.unlink(missing_ok=True)
    assert run.returncode == 1, run.explain()
    assert "SHA256 did not match!" in run.log, run.explain()
    assert _sh(up, "dpkg-query -W -f='${db:Status-Abbrev}' amdgpu-install 2>/dev/null || true").strip() in (
        "",
        "un",
    )
    assert not (root / "opt/rocm-7.2.4").exists()


def test_first_run_installs_rocm_and_fixes_the_lists(workstation):
    up, root, url, _ = workstation
    run = deploy(up.inventory, "tasks/rocm.py", limit="ws1")
    assert run.returncode == 0, run.explain()
    # No download: the file the last run fetched is the right one (only the checksum it was given was wrong).
    assert run.changed_operations == [
        "ROCm | Install amdgpu-install 7.2.4.70204-1",
        "ROCm | Check AMD's apt lists",
        "ROCm | amdgpu-install --usecase=rocm --no-dkms (ROCm 7.2.4)",
        "GPU access | workstation_users in render and video",
        "GPU access | New accounts join render and video (/etc/adduser.conf)",
    ], run.explain()
    # AMD's pin came with the installer deb (the stand-in ships it as AMD's does): the stage found it in place.
    assert (root / "etc/apt/preferences.d/repo-radeon-pin-600").is_file()
    assert (
        f"fixing AMD's apt lists: /etc/apt/sources.list.d/rocm.list: unexpected {url}/graphics/7.2.1/ubuntu "
        f"jammy, {url}/rocm/apt/7.2.1 jammy; lacks {url}/graphics/7.2.4/ubuntu jammy, {url}/rocm/apt/7.2.4 jammy"
    ) in host_lines(run.log, "ws1"), run.explain()
    assert (root / "etc/apt/sources.list.d/rocm.list").read_text().splitlines()[1:] == [
        f"deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] {url}/rocm/apt/7.2.4 jammy main",
        f"deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] {url}/graphics/7.2.4/ubuntu jammy main",
    ]
    # amdgpu-install got exactly these flags, and the apt-get it ran waited for the lock as configured.
    assert (root / "var/log/amdgpu-install-standin.args").read_text().splitlines() == [
        "-y --usecase=rocm --no-dkms",
        'DPkg::Lock::Timeout "120";',
    ]
    assert _sh(up, "readlink -e /opt/rocm").strip() == "/opt/rocm-7.2.4"
    assert _sh(up, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' rocm rocm-core").split("\n")[
        :2
    ] == ["rocm 7.2.4.70204-93~22.04 ii ", "rocm-core 7.2.4.70204-93~22.04 ii "]
    assert {"render", "video"} <= set(_sh(up, "id -nG maria").split())


def test_second_run_changes_nothing(workstation):
    up, _, _, _ = workstation
    run = deploy(up.inventory, "tasks/rocm.py", limit="ws1")
    assert run.returncode == 0, run.explain()
    # results {} would mean pyinfra printed no JSON at all, not that nothing changed.
    assert run.results and run.changed_operations == [], run.explain()


def test_opt_rocm_moved_back_when_pointed_elsewhere(workstation):
    """Another release registered as the /opt/rocm alternative (a stand-in directory) and selected by hand."""
    up, root, _, _ = workstation
    _sh(
        up,
        "mkdir -p /opt/rocm-6.4.1/.info && echo 6.4.1-83 > /opt/rocm-6.4.1/.info/version && "
        "update-alternatives --install /opt/rocm rocm /opt/rocm-6.4.1 60401 && "
        "update-alternatives --set rocm /opt/rocm-6.4.1",
    )
    try:
        run = deploy(up.inventory, "tasks/rocm.py", limit="ws1")
        assert run.returncode == 0, run.explain()
        assert run.changed_operations == ["ROCm | /opt/rocm -> /opt/rocm-7.2.4"], run.explain()
        assert _sh(up, "readlink -e /opt/rocm").strip() == "/opt/rocm-7.2.4"
    finally:
        _sh(up, "update-alternatives --remove rocm /opt/rocm-6.4.1; rm -rf /opt/rocm-6.4.1")


def test_another_release_stops_the_host_by_default(workstation):
    up, _, _, _ = workstation
    root = Path(up.host_state("ws2").root)
    run = deploy(up.inventory, "tasks/rocm.py", limit="ws2")
    assert run.returncode == 1, run.explain()
    assert (
        "ROCm: another ROCm release is installed: 6.4.1 (/opt/rocm-6.4.1); rocm_other_release is 'stop': "
        "uninstall it (sudo amdgpu-install --uninstall --rocmrelease=all) or set rocm_other_release: side-by-side"
    ) in host_lines(run.log, "ws2"), run.explain()
    assert not (root / "opt/rocm-7.2.4").exists()


def test_side_by_side_installs_beside_a_multi_version_release(workstation):
    up, _, _, _ = workstation
    root = Path(up.host_state("ws2").root)
    run = deploy(up.inventory, "tasks/rocm.py", "rocm_other_release=side-by-side", limit="ws2")
    assert run.returncode == 0, run.explain()
    assert (root / "var/log/amdgpu-install-standin.args").read_text().splitlines()[0] == (
        "-y --usecase=rocm --no-dkms --rocmrelease=7.2.4"
    )
    installed = _sh(up, "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'rocm*'", "ws2").split("\n")
    assert {"rocm6.4.1 ii ", "rocm-core6.4.1 ii ", "rocm7.2.4 ii ", "rocm-core7.2.4 ii "} <= set(installed)
    assert _sh(up, "readlink -e /opt/rocm", "ws2").strip() == "/opt/rocm-7.2.4"
    run = deploy(up.inventory, "tasks/rocm.py", "rocm_other_release=side-by-side", limit="ws2")
    # results {} would mean pyinfra printed no JSON at all, not that nothing changed.
    assert run.returncode == 0 and run.results and run.changed_operations == [], run.explain()


def test_the_lists_never_switch_off_apts_check_with_the_installers_keyring(workstation, tmp_path):
    """Over plain http (this mirror) nothing but apt's signature check — with the keyring the checksum-checked
    installer deb brought — vouches for the packages apt installs as root. An entry with trusted=yes (an admin's
    workaround, say) switches it off: the stage names it and rewrites the list without it. Then the mirror is taken
    over — a newer rocm-core, its indexes signed with another key — and apt refuses it."""
    up, root, _, mirror = workstation
    _sh(up, "sed -i 's/signed-by=/trusted=yes signed-by=/' /etc/apt/sources.list.d/rocm.list")
    run = deploy(up.inventory, "tasks/rocm.py", limit="ws1")
    assert run.returncode == 0, run.explain()
    assert run.changed_operations == ["ROCm | Check AMD's apt lists"], run.explain()
    assert (
        "fixing AMD's apt lists: /etc/apt/sources.list.d/rocm.list: trusted=yes switches off apt's signature check"
    ) in host_lines(run.log, "ws1"), run.explain()
    assert "trusted=yes" not in (root / "etc/apt/sources.list.d/rocm.list").read_text()

    newer = "7.2.4.70204-94~22.04"
    taken_over = build_deb(
        tmp_path, {"Package": "rocm-core", "Version": newer}, {"/opt/rocm-7.2.4/.info/version": "not AMD's\n"}
    )
    with Signer("someone who took the mirror over") as other:
        repository(mirror / "rocm" / "apt" / "7.2.4", [taken_over], other)
    done = up.host("ws1").run(["apt-get", "update", "-q"], check=False, env={"LC_ALL": "C.UTF-8"})
    output = done.stdout + done.stderr
    # apt refuses the new indexes and keeps the ones it had verified (a warning: its exit status stays 0).
    assert (
        "W: An error occurred during the signature verification. The repository is not updated and the previous "
        "index files will be used. GPG error: "
    ) in output and "/rocm/apt/7.2.4 jammy InRelease" in output, output
    assert "public key is not available: NO_PUBKEY" in output, output
    assert newer not in _sh(up, "apt-cache policy rocm-core")
