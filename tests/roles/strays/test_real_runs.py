"""tasks/strays.py for real: pyinfra over @chroot on Debian roots where apt pulled the distro ROCm packages in.

Debian 12: `slurm-wlm-rsmi-plugin` (-> librocm-smi64-1) and `librocsparse0` (-> libamdhip64-5 -> libhsa-runtime64-1 …).
Debian 13: `libucx0` (-> libamdhip64-5 5.7.1, as on Ubuntu noble). Each test works on an overlay of the cached root
(tests/support/debian_roots.py), so the packages are really purged by apt and the cached root stays as built.
The verifier is installed and compiled inside the root by the root's own python3 (3.11 on Debian 12, 3.13 on Debian 13),
and runs with it.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.chroot_hosts import chroot_host, run_pyinfra
from tests.support.debian_roots import image
from verify.debian.strays import find_strays

pytestmark = [pytest.mark.slow, pytest.mark.root]

DEBIAN12 = ("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0"))
DEBIAN13 = ("trixie", ("libucx0",))


INSTALL = "Strays | Install the verifier"


def current(root) -> str:
    return os.readlink(root / "var/lib/rocm-fleet/verifier/current")


def changed_besides_a_new_verifier(run, root, version_before: str) -> list[str]:
    """The operations a run changed, leaving out the verifier's install when verify/ itself changed between the runs
    (others edit the same working tree while these tests run; in CI the checkout is fixed and nothing is left out)."""
    return [name for name in run.changed_operations if not (name == INSTALL and current(root) != version_before)]


def installed(root) -> set[str]:
    done = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\\n"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[0] for line in done.stdout.splitlines() if line.split()[1].startswith("ii")}


def test_debian12_remove_purges_the_hip_chain_keeps_the_slurm_library_and_then_changes_nothing(tmp_path):
    with chroot_host(image(*DEBIAN12), tmp_path) as root:
        assert {"librocsparse0", "libamdhip64-5", "librocm-smi64-1"} <= installed(root)

        first = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert first.returncode == 0, first.explain()
        assert "Strays | Distro ROCm packages (purge where nothing needs them)" in first.changed_operations
        assert "librocm-smi64-1 kept: needed by librocm-smi-dev (kept), slurm-wlm-rsmi-plugin" in first.log
        assert "purging libamd-comgr2 libamdhip64-5 libhsa-runtime64-1 libhsakmt1 librocsparse0" in first.log

        after = installed(root)
        assert not {"librocsparse0", "libamdhip64-5", "libhsa-runtime64-1", "libhsakmt1", "libamd-comgr2"} & after
        assert {"librocm-smi64-1", "librocm-smi-dev", "slurm-wlm-rsmi-plugin"} <= after
        assert {stray.package for stray in find_strays(root).strays} == {"librocm-smi64-1", "librocm-smi-dev"}

        version = current(root)
        second = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert second.returncode == 0, second.explain()
        assert changed_besides_a_new_verifier(second, root, version) == [], second.explain()
        assert installed(root) == after


def test_debian13_libucx0_keeps_hip_until_it_goes_then_the_chain_is_purged(tmp_path):
    with chroot_host(image(*DEBIAN13), tmp_path) as root:
        report = run_pyinfra(root, "tasks/strays.py", {})  # stray_policy defaults to report
        assert report.returncode == 0, report.explain()
        # Only the verifier arrives (compiled by Debian 13's python3); the report changes nothing.
        assert report.changed_operations == [INSTALL], report.explain()
        assert list((root / "var/lib/rocm-fleet/verifier/current/verify/__pycache__").glob("cli.cpython-313.pyc"))
        assert "stray: libamdhip64-5 5.7.1-6+deb13u1 (amd64, source rocm-hipamd), needed by libucx0" in report.log
        assert "ships libhsa-runtime64.so.1, a SONAME a ROCm 7.2 consumer could bind to" in report.log

        version = current(root)
        kept = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert kept.returncode == 0, kept.explain()
        assert changed_besides_a_new_verifier(kept, root, version) == [], kept.explain()
        assert "libamdhip64-5 kept: needed by libucx0" in kept.log
        assert "libamdhip64-5" in installed(root)

        # The workstation's user removes what needed HIP; now nothing does, and the whole chain may go.
        subprocess.run(
            ["chroot", str(root), "apt-get", "purge", "-y", "-q", "libucx0"],
            check=True,
            capture_output=True,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"},
        )
        version = current(root)
        purged = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert purged.returncode == 0, purged.explain()
        assert changed_besides_a_new_verifier(purged, root, version) == [
            "Strays | Distro ROCm packages (purge where nothing needs them)"
        ], purged.explain()
        assert not {"libamdhip64-5", "libhsa-runtime64-1", "libhsakmt1", "libamd-comgr2"} & installed(root)
        assert find_strays(root).strays == ()

        version = current(root)
        again = run_pyinfra(root, "tasks/strays.py", {"stray_policy": "remove"})
        assert again.returncode == 0, again.explain()
        assert changed_besides_a_new_verifier(again, root, version) == [], again.explain()
