"""roles/strays/model.py: what `stray_policy: remove` may purge.

The plans for the real Debian 12/13 installs are checked by name; the rule itself is checked against dpkg: in a
scratch database filled by real dpkg, `dpkg --purge` of exactly the planned set must go through (dpkg refuses to
remove a package that an installed package still depends on), and adding any kept stray must make dpkg refuse.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from roles.strays.model import plan_removal
from tests.support.debs import ScratchDpkg, build_deb
from verify.debian.strays import Stray, StraysReport, find_strays

DATA = Path(__file__).parents[2] / "verify" / "debian" / "data" / "strays"
ROCM = {"Maintainer": "Debian ROCm Team <debian-ai@lists.debian.org>"}


def real_report(tmp_path: Path, name: str):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    shutil.copy(DATA / f"{name}.status", tmp_path / "var/lib/dpkg/status")
    return find_strays(tmp_path)


def test_debian12_purges_the_hip_chain_and_keeps_the_slurm_plugin_library(tmp_path):
    plan = plan_removal(real_report(tmp_path, "bookworm"))
    assert plan.purge == ("libamd-comgr2", "libamdhip64-5", "libhsa-runtime64-1", "libhsakmt1", "librocsparse0")
    assert [kept.line() for kept in plan.kept] == [
        "librocm-smi-dev kept: needed by slurm-wlm-rsmi-plugin-dev",
        "librocm-smi64-1 kept: needed by librocm-smi-dev (kept), slurm-wlm-rsmi-plugin; "
        "pulled in by slurm-wlm-rsmi-plugin, slurm-wlm-rsmi-plugin-dev",
    ]


def test_debian13_keeps_everything_libucx0_needs(tmp_path):
    plan = plan_removal(real_report(tmp_path, "trixie"))
    assert plan.purge == ()
    assert [kept.line() for kept in plan.kept] == [
        "libamd-comgr2 kept: needed by libamdhip64-5 (kept); pulled in by libucx0",
        "libamdhip64-5 kept: needed by libucx0",
        "libhsa-runtime64-1 kept: needed by libamdhip64-5 (kept), libucx0",
        "libhsakmt1 kept: needed by libhsa-runtime64-1 (kept); pulled in by libucx0",
    ]


# Scenarios installed with real dpkg: (packages, held packages, expected purge set).
SCENARIOS = {
    "chain with nothing above it": (
        [
            {"Package": "librocsparse0", "Source": "rocsparse", "Depends": "libamdhip64-5"},
            {"Package": "libamdhip64-5", "Source": "rocm-hipamd", "Depends": "libhsa-runtime64-1"},
            {"Package": "libhsa-runtime64-1", "Source": "rocr-runtime"},
        ],
        (),
        {"librocsparse0", "libamdhip64-5", "libhsa-runtime64-1"},
    ),
    "chain under a real user": (
        [
            {"Package": "libucx0", "Depends": "libamdhip64-5"},
            {"Package": "libamdhip64-5", "Source": "rocm-hipamd", "Depends": "libhsa-runtime64-1"},
            {"Package": "libhsa-runtime64-1", "Source": "rocr-runtime"},
            {"Package": "rocminfo", "Depends": "libhsa-runtime64-1"},
        ],
        (),
        {"rocminfo"},
    ),
    # One of the two must stay for `tool`; the plan keeps the first by name and purges the other.
    "alternatives between two strays": (
        [
            {"Package": "tool", "Depends": "libhipfft0 | librocfft0"},
            {"Package": "libhipfft0", "Source": "hipfft"},
            {"Package": "librocfft0", "Source": "rocfft"},
        ],
        (),
        {"librocfft0"},
    ),
    "alternative outside the strays": (
        [
            {"Package": "tool", "Depends": "librocm-smi64-1 | smi-shim"},
            {"Package": "smi-shim"},
            {"Package": "librocm-smi64-1", "Source": "rocm-smi-lib"},
        ],
        (),
        {"librocm-smi64-1"},
    ),
    "needed through a virtual package": (
        [
            {"Package": "tool", "Depends": "hsa-runtime"},
            {"Package": "libhsa-runtime64-1", "Source": "rocr-runtime", "Provides": "hsa-runtime"},
        ],
        (),
        set(),
    ),
    "strays needing each other": (
        [
            {"Package": "libhsakmt1", "Source": "roct-thunk-interface", "Depends": "libhsa-runtime64-1"},
            {"Package": "libhsa-runtime64-1", "Source": "rocr-runtime", "Depends": "libhsakmt1"},
        ],
        (),
        {"libhsakmt1", "libhsa-runtime64-1"},
    ),
    "held stray holds its dependencies": (
        [
            {"Package": "librocsparse0", "Source": "rocsparse", "Depends": "libamdhip64-5"},
            {"Package": "libamdhip64-5", "Source": "rocm-hipamd"},
        ],
        ("librocsparse0",),
        set(),
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_plan_is_exactly_what_dpkg_lets_go(tmp_path, scenario):
    packages, held, expected = SCENARIOS[scenario]
    scratch = ScratchDpkg(tmp_path)
    done = scratch.install(*(build_deb(tmp_path, {**ROCM, **control}) for control in packages))
    assert done.returncode == 0, done.stdout + done.stderr
    for name in held:
        subprocess.run(
            ["dpkg", f"--root={scratch.root}", "--set-selections"], input=f"{name} hold\n", text=True, check=True
        )

    plan = plan_removal(find_strays(scratch.root))
    assert set(plan.purge) == expected, plan.summary()
    if plan.purge:
        purged = scratch.purge(*plan.purge)
        assert purged.returncode == 0, f"dpkg refused the plan {plan.purge}:\n{purged.stdout}{purged.stderr}"
        # Everything kept still has what it needs: dpkg's own audit finds nothing broken.
        assert scratch.dpkg("--audit").stdout == ""
    for kept in plan.kept:
        if kept.package in held:
            continue
        refused = scratch.purge(kept.package)
        assert refused.returncode != 0 and "dependency problems" in refused.stderr, (
            f"{kept.line()}, yet dpkg purged it:\n{refused.stdout}{refused.stderr}"
        )


def test_held_reason_says_how_to_release_it(tmp_path):
    report = StraysReport(
        "/", "amd64", (Stray("rocminfo", "5.7.1-3", "amd64", "rocminfo", "hold", "installed", False),)
    )
    plan = plan_removal(report)
    assert plan.purge == ()
    assert [kept.line() for kept in plan.kept] == [
        "rocminfo kept: on hold (apt-mark unhold rocminfo to let it be removed)"
    ]


def test_foreign_architecture_strays_are_named_with_their_architecture():
    report = StraysReport(
        "/",
        "amd64",
        (
            Stray("libhsakmt1", "6.2.4", "i386", "roct-thunk-interface", "install", "installed", True),
            Stray("libhsakmt1", "6.2.4", "amd64", "roct-thunk-interface", "install", "installed", True),
        ),
    )
    assert plan_removal(report).purge == ("libhsakmt1", "libhsakmt1:i386")
