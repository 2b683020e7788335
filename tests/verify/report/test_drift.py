"""verify/report/drift.py: the drift between two reports, in plain words, on real reports.

Every report here is the real verifier's (`verify check --root IMAGE --json`) on a stand-in workstation image
(tests/support/drift_images.py: gcc-built libraries with ROCm's real SONAMEs, STAND-INS for the torch ROCm wheel and
ROCm 7.2.4, which cannot be installed here) before and after a change; the distro packages' dpkg data is real
(Debian 12 with slurm-wlm-rsmi-plugin, Debian 13 with libucx0).
"""

from __future__ import annotations

import shutil

import pytest

from tests.support.drift_images import Workstation, verify_report
from verify.report.drift import (
    BETTER,
    CHANGED,
    CHECKS,
    LINKAGE,
    STRAYS,
    VERSIONS,
    WORSE,
    Change,
    Drift,
    compare_reports,
)
from verify.report.report import Report

BOOKWORM_STRAYS_WORSE = [
    "worse: new stray package: libamd-comgr2 5.2.3-2 (pulled in by librocsparse0)",
    "worse: new stray package: libamdhip64-5 5.2.3-8 (pulled in by librocsparse0)",
    "worse: new stray package: libhsa-runtime64-1 5.2.3-3 (pulled in by librocsparse0)",
    "worse: new stray package: libhsakmt1 5.2.3+dfsg-1 (pulled in by librocsparse0)",
    "worse: new stray package: librocm-smi-dev 5.2.3-2 (pulled in by slurm-wlm-rsmi-plugin-dev)",
    "worse: new stray package: librocm-smi64-1 5.2.3-2 (pulled in by slurm-wlm-rsmi-plugin, "
    "slurm-wlm-rsmi-plugin-dev; ships librocm_smi64.so.1, which a ROCm 7.2 consumer could bind to)",
    "worse: new stray package: librocsparse0 5.3.0+dfsg-2 (installed by hand)",
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Report]:
    """name → real report: provisioned, after the Debian 12 rsmi plugin, after an upgrade of its library, back to
    provisioned, with Debian 13's libucx0 chain, without system ROCm, without bitsandbytes."""
    top = tmp_path_factory.mktemp("drift")
    found = {}
    ws = Workstation.provisioned(top / "ws")
    found["provisioned"] = verify_report(ws.root)
    ws.distro_rocm_smi()
    found["rsmi"] = verify_report(ws.root)
    ws.restore_rocm_smi()
    ws.distro_rocm_smi("6.1.2-1")
    found["rsmi_upgraded"] = verify_report(ws.root)
    ws.restore_rocm_smi()
    found["provisioned_again"] = verify_report(ws.root)
    ws.distro_ucx()
    found["ucx"] = verify_report(ws.root)
    without_rocm = Workstation.provisioned(top / "without-rocm")
    without_rocm.remove_system_rocm()
    found["no_rocm"] = verify_report(without_rocm.root)
    without_bnb = Workstation.provisioned(top / "without-bnb")
    shutil.rmtree(without_bnb.path("/opt/rocm-fleet/venv/lib/python3.11/site-packages/bitsandbytes"))
    found["no_bnb"] = verify_report(without_bnb.root)
    return found


def test_the_images_are_what_the_tests_say(reports):
    assert reports["provisioned"].verdict == "warn"  # two HIP runtimes in one process: passing, with a warning
    assert reports["rsmi"].verdict == "fail"
    assert reports["rsmi"].reason.startswith("linkage.static: librocm_smi64.so.1 resolves to /usr/lib/")


def test_a_distro_library_replacing_rocms_own_names_its_package_and_each_new_stray_what_pulled_it_in(reports):
    drift = compare_reports(reports["provisioned"], reports["rsmi"])
    assert drift.lines() == [
        "worse: librocm_smi64.so.1 now resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 from librocm-smi64-1 "
        "5.2.3-2 (distro) instead of /opt/rocm-7.2.4/lib",
        *BOOKWORM_STRAYS_WORSE,
    ]
    assert drift.got_worse
    assert (drift.verdict_before, drift.verdict_after) == ("warn", "fail")
    # The linkage and strays checks moved too, but their detailed lines already say so: no extra status line.
    assert not [c for c in drift.changes if c.topic == CHECKS]


def test_purging_it_again_is_stated_as_cleared(reports):
    drift = compare_reports(reports["rsmi"], reports["provisioned"], baseline_label="the last passing report")
    assert drift.lines() == [
        "better: librocm_smi64.so.1 now resolves to /opt/rocm-7.2.4/lib/librocm_smi64.so.1 instead of "
        "/usr/lib/x86_64-linux-gnu from librocm-smi64-1 5.2.3-2 (distro)",
        "better: stray package gone: libamd-comgr2 5.2.3-2",
        "better: stray package gone: libamdhip64-5 5.2.3-8",
        "better: stray package gone: libhsa-runtime64-1 5.2.3-3",
        "better: stray package gone: libhsakmt1 5.2.3+dfsg-1",
        "better: stray package gone: librocm-smi-dev 5.2.3-2",
        "better: stray package gone: librocm-smi64-1 5.2.3-2",
        "better: stray package gone: librocsparse0 5.3.0+dfsg-2",
    ]
    assert not drift.got_worse and len(drift.better) == 8


def test_an_upgrade_of_a_stray_is_a_change_not_a_worsening(reports):
    drift = compare_reports(reports["rsmi"], reports["rsmi_upgraded"])
    assert drift.changes == (
        Change(
            CHANGED,
            LINKAGE,
            "librocm_smi64.so.1 at /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 now comes from "
            "librocm-smi64-1 6.1.2-1 (distro) instead of librocm-smi64-1 5.2.3-2 (distro)",
        ),
        Change(CHANGED, STRAYS, "stray package librocm-smi64-1 is now 6.1.2-1 (was 5.2.3-2)"),
    )


def test_debian_13s_libucx0_bringing_hip_5_7(reports):
    drift = compare_reports(reports["provisioned_again"], reports["ucx"])
    assert drift.lines() == [
        "worse: new stray package: libamd-comgr2 6.0+git20231212.4510c28+dfsg-3+b2 (pulled in by libucx0)",
        "worse: new stray package: libamdhip64-5 5.7.1-6+deb13u1 (pulled in by libucx0)",
        "worse: new stray package: libhsa-runtime64-1 6.1.2-3 (pulled in by libucx0)",
        "worse: new stray package: libhsakmt1 6.2.4+ds-1 (pulled in by libucx0)",
    ]


def test_rocm_removed_says_what_is_no_longer_found_and_which_check_failed(reports):
    drift = compare_reports(reports["provisioned"], reports["no_rocm"])
    assert drift.lines() == [
        "worse: libhipblas.so.3 is no longer found (it resolved to /opt/rocm/lib/libhipblas.so.3)",
        "worse: libhipblaslt.so.1 is no longer found (it resolved to /opt/rocm/lib/libhipblaslt.so.1)",
        "worse: versions.rocm: pass → fail — no system ROCm (no /opt/rocm/.info/version, rocm-core not installed) "
        "— install ROCm 7.2.4 (amdgpu-install -y --usecase=rocm --no-dkms)",
        "changed: no longer loaded: libamdhip64.so.7, librocm_smi64.so.1",
        "changed: system ROCm: 7.2.4-93 → none",
    ]
    back = compare_reports(reports["no_rocm"], reports["provisioned"])
    assert back.lines() == [
        "better: libhipblas.so.3 is found now: /opt/rocm/lib/libhipblas.so.3",
        "better: libhipblaslt.so.1 is found now: /opt/rocm/lib/libhipblaslt.so.1",
        "better: versions.rocm: fail → pass — ROCm 7.2.4 (rocm-core 7.2.4.70204-93~22.04)",
        "changed: now also loaded from ROCm 7.2.4: libamdhip64.so.7, librocm_smi64.so.1",
        "changed: system ROCm: none → 7.2.4-93",
    ]


def test_a_report_without_a_process_model_falls_back_to_the_checks_status(reports):
    """The bitsandbytes package directory gone (its dist-info left): the check stops before modelling the process,
    so there are no library lines to compare — the check's own status line says what moved."""
    drift = compare_reports(reports["provisioned"], reports["no_bnb"])
    assert drift.changes == (
        Change(
            WORSE,
            CHECKS,
            "linkage.static: warn → fail — bitsandbytes is not installed in "
            "/opt/rocm-fleet/venv — pip install bitsandbytes==0.50.1",
        ),
    )


def test_nothing_changed_says_so(reports):
    drift = compare_reports(reports["provisioned"], reports["provisioned_again"], baseline_label="the last one")
    assert drift.changes == ()
    assert drift.summary() == "no change since the last one"


def test_summary_and_json(reports):
    drift = compare_reports(reports["provisioned"], reports["rsmi"], baseline_label="the last passing report (T)")
    assert drift.summary() == (
        "since the last passing report (T): 8 worse — worse: librocm_smi64.so.1 now resolves to "
        "/usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 from librocm-smi64-1 5.2.3-2 (distro) instead of "
        "/opt/rocm-7.2.4/lib (+7 more)"
    )
    again = Drift.from_json(drift.to_json())
    assert again.lines() == drift.lines() and again.baseline == drift.baseline
    assert again.verdict_after == "fail"


def test_the_order_is_worse_then_better_then_changed():
    drift = Drift(
        "b", "pass", "fail", (Change(CHANGED, VERSIONS, "c"), Change(BETTER, STRAYS, "b"), Change(WORSE, LINKAGE, "w"))
    )
    assert drift.lines() == ["worse: w", "better: b", "changed: c"]


# --- kernels and boots (schema 2) ------------------------------------------------------------------------------------


def _kernel_report(*, running, installed, without=(), driver="pass", driver_reason="ok", boot=None):
    """A report with these kernel facts and a kernel.driver check — shaped as verify/commands/check.py writes them
    (an image under --root has no running kernel, so these are built directly)."""
    from dataclasses import replace

    from tests.support.report_samples import sample
    from verify.report.report import BootCheckFacts, CheckResult, KernelFacts

    nxt = installed[-1] if installed else None
    kernel = KernelFacts(
        running=running,
        next_boot=nxt,
        reboot_pending=nxt != running,
        amdgpu_loaded=driver == "pass",
        running_has_amdgpu=running not in without,
        next_boot_has_amdgpu=nxt not in without,
        installed=tuple(installed),
        without_amdgpu=tuple(without),
    )
    report = sample(checks=[CheckResult("kernel.driver", "amdgpu", driver, driver_reason)])
    facts = replace(report.facts, kernel=kernel, boot_check=BootCheckFacts(*boot) if boot else None)
    return Report.from_json(replace(report, facts=facts).to_json())


def test_a_kernel_installed_without_amdgpu_is_worse_and_says_the_gpu_goes_at_the_next_boot():
    before = _kernel_report(running="6.8.0-49-generic", installed=["6.8.0-49-generic"])
    after = _kernel_report(
        running="6.8.0-49-generic", installed=["6.8.0-49-generic", "6.8.0-51-generic"], without=["6.8.0-51-generic"]
    )
    drift = compare_reports(before, after)
    assert drift.lines() == [
        "worse: kernel 6.8.0-51-generic was installed without amdgpu.ko: it boots next — after "
        "the next reboot the GPU is gone"
    ]
    good = _kernel_report(running="6.8.0-49-generic", installed=["6.8.0-49-generic", "6.8.0-51-generic"])
    assert compare_reports(before, good).lines() == [
        "changed: kernel 6.8.0-51-generic was installed (amdgpu.ko present)"
    ]


def test_a_reboot_into_a_kernel_without_the_driver_says_the_gpu_is_gone():
    before = _kernel_report(
        running="6.8.0-49-generic", installed=["6.8.0-49-generic", "6.8.0-51-generic"], without=["6.8.0-51-generic"]
    )
    reason = (
        "the running kernel 6.8.0-51-generic has no amdgpu.ko — apt-get install linux-modules-extra-6.8.0-51-generic"
    )
    after = _kernel_report(
        running="6.8.0-51-generic",
        installed=["6.8.0-49-generic", "6.8.0-51-generic"],
        without=["6.8.0-51-generic"],
        driver="fail",
        driver_reason=reason,
    )
    lines = compare_reports(before, after).lines()
    assert lines == [f"worse: after the reboot into 6.8.0-51-generic the GPU is gone: {reason}"]


def test_a_new_boot_checks_result_is_stated_and_a_failed_one_is_worse():
    reason = "kernel.driver: the running kernel 6.8.0-51-generic has no amdgpu.ko — apt-get install …"
    before = _kernel_report(
        running="6.8.0-49-generic",
        installed=["6.8.0-49-generic"],
        boot=("boot-a", "6.8.0-49-generic", "2026-12-01T08:00:00Z", "pass", "all 14 checks passed"),
    )
    after = _kernel_report(
        running="6.8.0-49-generic",
        installed=["6.8.0-49-generic"],
        boot=("boot-b", "6.8.0-51-generic", "2026-12-02T08:00:00Z", "fail", reason),
    )
    assert compare_reports(before, after).lines() == [
        "worse: after the reboot into 6.8.0-51-generic the GPU is gone: the running kernel 6.8.0-51-generic has no "
        "amdgpu.ko — apt-get install … (checked 2026-12-02T08:00:00Z)"
    ]
    assert compare_reports(after, after).lines() == []  # the same boot: nothing new


def test_a_version_1_baseline_is_still_read_and_compared(reports):
    """Reports kept from before schema 2 (reports/last-pass/<host>.json) stay readable: no kernel lines, no crash."""
    document = reports["provisioned"].to_json()
    old = {
        **document,
        "schema_version": 1,
        "facts": {
            k: v for k, v in document["facts"].items() if k not in ("kernel", "apt_pin", "environment", "boot_check")
        },
        "checks": [c for c in document["checks"] if not c["id"].startswith(("kernel.", "environment.", "apt."))],
    }
    baseline = Report.from_json(old)
    assert baseline.facts.kernel is None and baseline.facts.boot_check is None
    drift = compare_reports(baseline, reports["rsmi"])
    assert drift.got_worse and all("kernel" not in line for line in drift.lines())
