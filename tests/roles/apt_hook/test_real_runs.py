"""tasks/apt_hook.py and the hooks for real: pyinfra over @chroot on a Debian 12 root, then real dpkg and apt-get runs
in it.

The root is an overlay of the cached Debian 12 root of the strays tests (tests/support/debian_roots.py), with python3,
where apt pulled slurm-wlm-rsmi-plugin's distro ROCm packages in; it has no venv, so the hook's check itself ends in its
"no check" line, once per run of the check — what matters here is what dpkg and apt do with the hooks: a plain dpkg
run gets one line, an apt run that calls dpkg twice (unpack, configure) gets one too, and the exit status stays what
dpkg made it. The whole scenario with a venv and apt really pulling a stray in runs over SSH in
tests/tasks/test_apt_hook_fleet.py (and dpkg -i of a stray in tests/tasks/test_dpkg_hook_fleet.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from roles.apt_hook.facts import AptHookFiles
from roles.apt_hook.model import CONF_PATH, DPKG_CONF_PATH, HOOK_DIR, HOOK_PREFIX, SCRIPT_PATH
from roles.verifier import TOP, not_installed_line
from tests.support.chroot_hosts import chroot_host, run_pyinfra
from tests.support.debian_roots import image
from tests.support.debs import build_deb

pytestmark = [pytest.mark.slow, pytest.mark.root]

DEBIAN12 = ("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0"))
HOOK = "Apt hook | Re-check linkage and strays after every dpkg run (dpkg post-invoke, apt DPkg::Post-Invoke)"
INSTALL = "Apt hook | Install the verifier"


def sh(root: Path, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["chroot", str(root), "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"},
    )


def hook_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(HOOK_PREFIX)]


def current_version(root: Path) -> str:
    return os.readlink(root / TOP.lstrip("/") / "current")


def changed_besides_a_new_verifier(run, root: Path, version_before: str) -> list[str]:
    """The operations a run changed, leaving out the verifier's install and the new baseline when verify/ itself
    changed between the runs (others edit the same working tree while these tests run; in CI the checkout is fixed)."""
    if current_version(root) == version_before:
        return run.changed_operations
    return [name for name in run.changed_operations if name not in (INSTALL, HOOK)]


def local_debs(root: Path, workdir: Path) -> None:
    """/tmp/ok.deb installs cleanly; /tmp/bad.deb's postinst fails, so dpkg (and apt) fail."""
    ok = build_deb(workdir, {"Package": "rocm-fleet-test-ok", "Version": "1.0", "Architecture": "all"})
    (root / "tmp/ok.deb").write_bytes(ok.read_bytes())
    tree = workdir / "bad"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(
        "Package: rocm-fleet-test-bad\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: Test <test@example.org>\nDescription: postinst fails\n"
    )
    (tree / "DEBIAN/postinst").write_text("#!/bin/sh\necho 'postinst fails on purpose'\nexit 1\n")
    (tree / "DEBIAN/postinst").chmod(0o755)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(tree), str(root / "tmp/bad.deb")],
        check=True,
        capture_output=True,
    )


def test_installed_idempotently_never_fails_apt_and_removed_through_the_inventory(tmp_path):
    with chroot_host(image(*DEBIAN12), tmp_path) as root:
        first = run_pyinfra(root, "tasks/apt_hook.py", {})
        assert first.returncode == 0, first.explain()
        assert HOOK in first.changed_operations
        conf = (root / CONF_PATH.lstrip("/")).read_text()
        assert "DPkg::Post-Invoke" in conf and SCRIPT_PATH in conf
        assert "post-invoke=" in (root / DPKG_CONF_PATH.lstrip("/")).read_text()
        assert "--venv /opt/rocm-fleet/venv --expect-rocm 7.2.4" in (root / SCRIPT_PATH.lstrip("/")).read_text()
        assert INSTALL in first.changed_operations
        compiled = root / TOP.lstrip("/") / "current/verify/checks/__pycache__"
        assert list(compiled.glob("host.cpython-311.pyc"))
        # The fact's real command, run in the root, parsed by its real process().
        files = AptHookFiles().process(sh(root, AptHookFiles().command()).stdout.splitlines())
        assert files.python == "/usr/bin/python3" and files.config.splitlines() == conf.splitlines()
        assert files.script.splitlines() == (root / SCRIPT_PATH.lstrip("/")).read_text().splitlines()

        version = current_version(root)
        second = run_pyinfra(root, "tasks/apt_hook.py", {})
        assert second.returncode == 0, second.explain()
        assert changed_besides_a_new_verifier(second, root, version) == [], second.explain()

        local_debs(root, tmp_path)
        # No venv in this root: the hook's check says so in one line each time it runs, and dpkg and apt succeed.
        no_venv = (
            f"{HOOK_PREFIX} no check — /opt/rocm-fleet/venv: not a venv (no pyvenv.cfg) — pass "
            "the venv's directory, e.g. /opt/rocm-fleet/venv"
        )
        for command in ("dpkg -i /tmp/ok.deb", "dpkg --purge rocm-fleet-test-ok"):  # plain dpkg: its own hook
            done = sh(root, command)
            assert done.returncode == 0 and hook_lines(done) == [no_venv], done.stdout + done.stderr
        # apt runs dpkg twice or more (--unpack, --configure): dpkg's hook stands aside, apt's runs the check once.
        log = root / "var/log/dpkg.log"
        logged = len(log.read_text().splitlines())
        done = sh(root, "apt-get install -y /tmp/ok.deb")
        assert done.returncode == 0, done.stdout + done.stderr
        dpkg_runs = [line for line in log.read_text().splitlines()[logged:] if " startup " in line]
        assert len(dpkg_runs) >= 2 and hook_lines(done) == [no_venv], (dpkg_runs, done.stdout)

        # dpkg fails: apt's exit status (100) stays what it was, the hook still reports.
        done = sh(root, "apt-get install -y /tmp/bad.deb")
        assert done.returncode == 100 and "postinst fails on purpose" in done.stdout
        assert len(hook_lines(done)) == 1
        assert sh(root, "dpkg --purge rocm-fleet-test-bad").returncode == 0

        # The verifier deleted: one line, apt's exit status untouched.
        sh(root, f"mv {TOP} {TOP}.away")
        done = sh(root, "apt-get install -y --reinstall /tmp/ok.deb")
        assert done.returncode == 0, done.stdout + done.stderr
        assert hook_lines(done) == [not_installed_line(HOOK_PREFIX)]
        sh(root, f"mv {TOP}.away {TOP}")

        # python3 gone: one line, apt's exit status untouched, with dpkg succeeding and failing.
        sh(root, "mv /usr/bin/python3 /usr/bin/python3.away")
        try:
            done = sh(root, "apt-get install -y --reinstall /tmp/ok.deb")
            assert done.returncode == 0, done.stdout + done.stderr
            assert hook_lines(done) == [
                f"{HOOK_PREFIX} not run - /usr/bin/python3 is missing (apt-get install "
                "python3, then run tasks/apt_hook.py again)"
            ]
            done = sh(root, "apt-get install -y /tmp/bad.deb")
            assert done.returncode == 100 and len(hook_lines(done)) == 1
            assert sh(root, "dpkg --purge rocm-fleet-test-bad").returncode == 0
        finally:
            sh(root, "mv /usr/bin/python3.away /usr/bin/python3")

        # apt_hook: False removes it all, and says nothing is left on the next run.
        removed = run_pyinfra(root, "tasks/apt_hook.py", {"apt_hook": "false"})
        assert removed.returncode == 0, removed.explain()
        assert removed.changed_operations == ["Apt hook | Remove the apt hook (apt_hook: False)"]
        assert not (root / CONF_PATH.lstrip("/")).exists() and not (root / HOOK_DIR.lstrip("/")).exists()
        assert not (root / DPKG_CONF_PATH.lstrip("/")).exists()
        assert (root / TOP.lstrip("/") / "launcher.py").is_file()  # the verifier stays: the other stages use it
        assert hook_lines(sh(root, "apt-get install -y --reinstall /tmp/ok.deb")) == []
        assert hook_lines(sh(root, "dpkg -i /tmp/ok.deb")) == []
        again = run_pyinfra(root, "tasks/apt_hook.py", {"apt_hook": "false"})
        assert again.returncode == 0 and again.changed_operations == [], again.explain()
