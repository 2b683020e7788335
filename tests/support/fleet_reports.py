"""Synthetic fleets for the summary's tests: reports built the way the verifier builds them (build_report, every check
it always runs, its reasons as the real verifier words them, so judge_report finds them proven), without running it —
the summary is what is under test.

`fleet_of(pass_=40, no_rocm=12, strays=5, unreachable=3)` gives HostOutcomes of four kinds:
- pass: every check passes on one GPU (gfx1100 on most, gfx90a on every fifth host) — the day-2 checks too
  (environment.*, apt.*, kernel.*: schema 2, with the kernel's facts);
- no ROCm: linkage.static fails on libhipblas.so.3 (bitsandbytes' RUNPATH finds no system ROCm), versions.rocm fails;
- strays: linkage passes, the strays check fails on libamdhip64-5 pulled in by libucx0;
- unreachable: no report.
Host names are ws01…wsNN in that order.
"""

from __future__ import annotations

from pathlib import Path

from roles.verification.host_row import UNREACHABLE, VERIFIED, HostOutcome
from verify.question import Question
from verify.report.report import (
    FAIL,
    PASS,
    CheckResult,
    Facts,
    Gpu,
    HostInfo,
    KernelFacts,
    Nf4Run,
    Report,
    StatusLine,
    StraysFacts,
    build_report,
)

AT = "2026-12-01T17:00:00Z"
OS = "Ubuntu 24.04.3 LTS"
KERNEL = "6.8.0-51-generic"
REQUEST = Question(Path("/opt/rocm-fleet/venv"), "7.2.4", "0.50.1", expect_amd_repo=True)
NO_HIPBLAS = (
    "libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found via RUNPATH "
    "/opt/rocm/lib:/opt/rocm-7.2.4/lib, ld.so.cache, system dirs — install ROCm 7.2.4 "
    "(amdgpu-install -y --usecase=rocm --no-dkms)"
)
NO_ROCM = (
    "no system ROCm (no /opt/rocm/.info/version, rocm-core not installed) — install ROCm 7.2.4 "
    "(amdgpu-install -y --usecase=rocm --no-dkms)"
)
STRAY = (
    "1 distro ROCm package(s): libamdhip64-5 5.7.1-3 (amd64, source rocm-hipamd), needed by libucx0, pulled in "
    "by libucx0 — purge it (stray_policy: remove) or find what needs it"
)


def _checks(kind: str) -> list[CheckResult]:
    linkage = (FAIL, NO_HIPBLAS) if kind == "no_rocm" else (PASS, "bitsandbytes' ROCm libraries from ROCm 7.2.4")
    rocm = (FAIL, NO_ROCM) if kind == "no_rocm" else (PASS, "ROCm 7.2.4 (rocm-core 7.2.4.70204-93)")
    strays = (FAIL, STRAY) if kind == "strays" else (PASS, "no distro ROCm packages")
    return [
        CheckResult("linkage.static", "static linkage", *linkage),
        CheckResult("versions.rocm", "system ROCm", *rocm),
        CheckResult("versions.torch", "torch", PASS, "torch 2.13.0+rocm7.2"),
        CheckResult("versions.bitsandbytes", "bitsandbytes", PASS, "bitsandbytes 0.50.1"),
        CheckResult("strays", "stray distro ROCm packages", *strays),
        CheckResult(
            "environment.loader",
            "a login's loader environment",
            PASS,
            "no LD_LIBRARY_PATH or LD_PRELOAD in /etc/environment, /etc/profile.d, the venv's activate",
        ),
        CheckResult("environment.bnb_rocm_version", "BNB_ROCM_VERSION", PASS, "BNB_ROCM_VERSION is not set"),
        CheckResult("environment.amdsmi", "amdsmi in the venv", PASS, "no amdsmi package in the venv"),
        CheckResult(
            "apt.pin",
            "AMD's apt pin",
            PASS,
            "AMD's pin /etc/apt/preferences.d/repo-radeon-pin-600 is "
            "effective: apt's candidates for rocminfo, hipcc … come from repo.radeon.com",
        ),
        CheckResult("apt.lists", "AMD's apt lists", PASS, "enabled: https://repo.radeon.com/rocm/apt/7.2.4 noble"),
        CheckResult(
            "kernel.driver",
            "amdgpu in the running kernel",
            PASS,
            f"amdgpu loaded in {KERNEL} (amdgpu.ko present), /dev/kfd present",
        ),
        CheckResult("kernel.next_boot", "amdgpu after the next boot", PASS, f"no reboot pending; {KERNEL} boots next"),
        CheckResult("kernel.packages", "kernel packages", PASS, f"headers and modules-extra for {KERNEL} installed"),
        CheckResult("runtime.torch", "torch at runtime", PASS, "torch 2.13.0+rocm7.2, HIP 7.2.53211"),
        CheckResult("runtime.devices", "GPUs", PASS, "1 GPU: gfx1100"),
        CheckResult("runtime.bnb_library", "bitsandbytes' library", PASS, "libbitsandbytes_rocm72.so loaded"),
        CheckResult("runtime.maps", "mapped as predicted", PASS, "all 20 predicted objects mapped"),
        CheckResult("nf4.cuda0", "NF4 on cuda:0", PASS, "NF4 on cuda:0: round-trip |err| 0.0727"),
    ]


def report_of(name: str, kind: str, arch: str = "gfx1100", at: str = AT) -> Report:
    checks = _checks(kind)
    linkage = checks[0]
    facts = Facts(
        rocm=None if kind == "no_rocm" else "7.2.4-93",
        torch="2.13.0+rocm7.2",
        torch_hip="7.2.53211",
        bitsandbytes="0.50.1",
        bnb_library="libbitsandbytes_rocm72.so",
        gpus=(Gpu(0, "AMD Radeon PRO W7900" if arch == "gfx1100" else "AMD Instinct MI210", arch, True),),
        device_mode="gpu",
        linkage=StatusLine(
            linkage.status, linkage.reason, "libhipblas.so.3 not found" if kind == "no_rocm" else "from ROCm 7.2.4"
        ),
        strays=StraysFacts(1, ("libamdhip64-5",), ()) if kind == "strays" else StraysFacts(0, (), ()),
        nf4=(Nf4Run("cuda:0", PASS, 0.0727, True),),
        kernel=KernelFacts(KERNEL, KERNEL, False, True, True, True, (KERNEL,), ()),
    )
    report = build_report(
        host=HostInfo(name, OS, KERNEL, "x86_64", "3.12.3"),
        request=REQUEST,
        facts=facts,
        checks=checks,
        generated_at=at,
        tool_version="0.1.0",
    )
    return Report.from_json(report.to_json())  # as every reader gets it


def fleet_of(pass_: int = 40, no_rocm: int = 12, strays: int = 5, unreachable: int = 3) -> list[HostOutcome]:
    kinds = ["pass"] * pass_ + ["no_rocm"] * no_rocm + ["strays"] * strays + ["unreachable"] * unreachable
    width = len(str(len(kinds)))
    outcomes = []
    for number, kind in enumerate(kinds, start=1):
        name = f"ws{number:0{width}d}"
        if kind == "unreachable":
            outcomes.append(HostOutcome(name, UNREACHABLE, detail="could not connect"))
        else:
            arch = "gfx90a" if number % 5 == 0 else "gfx1100"
            outcomes.append(HostOutcome(name, VERIFIED, report_of(name, kind, arch)))
    return outcomes
