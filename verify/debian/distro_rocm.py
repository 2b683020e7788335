"""Which installed packages are distro-archive ROCm ("strays") — as data. (Which SONAMEs a consumer of a release
asks for is the release's data: verify/stack/releases/.)

A stray is a package built from one of the ROCm *source* packages of Debian or Ubuntu. The source name is the rule
because it is what every binary of a ROCm component shares (rocm-hipamd -> libamdhip64-5, hipcc, libhiprtc-builtins5,
rocm-opencl-icd …) and survives renames of binaries (librocm-smi64-1, rocm-device-libs-17 …). The Maintainer field is
*not* usable alone: the same list address (debian-ai@lists.debian.org) also maintains pytorch, onnx, xgboost …, and
Ubuntu replaces it with "Ubuntu Developers".

AMD's own packages (repo.radeon.com) reuse some of these names (rocminfo, hipcc, rocm-cmake, rocblas …) and are never
strays: they carry AMD's maintainer address ("ROCm Dev Support <rocm-dev.support@amd.com>") and a version with the
release's build number before the revision ("1.0.0.70204-93~24.04", "6.2.2.60202-116~22.04").
"""

from __future__ import annotations

import re

# Source packages of ROCm components in Debian (bookworm, trixie, sid) and Ubuntu (noble, jammy; synced from Debian).
# Checked against the bookworm and trixie archives' Packages indexes (Source and Maintainer fields); the ones marked
# "sid/Ubuntu" are newer components packaged by the same team, listed so that an upgrade does not slip past.
DISTRO_ROCM_SOURCES = frozenset(
    {
        # runtime and driver interface
        "rocm-hipamd",  # libamdhip64-5, libhiprtc-builtins5, hipcc, rocm-opencl-icd
        "rocr-runtime",  # libhsa-runtime64-1
        "roct-thunk-interface",  # libhsakmt1
        "rocm-compilersupport",  # libamd-comgr2
        "rocm-device-libs",  # rocm-device-libs(-17)
        "rocminfo",
        "rocm-smi-lib",  # librocm-smi64-1, liboam1, rocm-smi
        "amdsmi",  # libamd-smi0, amd-smi
        "rocm-cmake",
        "rocdbgapi",  # librocm-dbgapi0
        "roctracer",  # libroctx64-4
        "hipify",
        # math and communication libraries
        "rocblas",
        "rocsolver",
        "rocsparse",
        "rocfft",
        "rocrand",  # librocrand1 (and libhiprand1 before hiprand got its own source)
        "hiprand",  # sid/Ubuntu
        "rocalution",
        "rocprim",
        "rocthrust",
        "hipcub",
        "hipblas",
        "hipsparse",
        "hipfft",
        "hipsolver",
        "rccl",
        # sid/Ubuntu
        "hipblaslt",
        "hipblas-common",
        "hipsparselt",
        "miopen",
        "rocwmma",
        "composable-kernel",
        "rocprofiler-register",
        "rocprofiler",
    }
)

# Distro maintainers whose packages are never AMD's, and AMD's packaging address.
AMD_MAINTAINER = re.compile(r"@amd\.com>?\s*$", re.IGNORECASE)
# AMD's versions carry the release's build number (major*10000 + minor*100 + patch, 5 or 6 digits) as the last
# upstream component: "7.2.4.70204-93~24.04", "1.0.0.70204-93~24.04", "2.2.0.60202-116~22.04".
AMD_VERSION = re.compile(r"^(?:\d+:)?[0-9.]+\.\d{5,6}-")


def is_amd_version(version: str) -> bool:
    """Whether a Debian version is one of AMD's (any release): it carries the release's build number."""
    return bool(AMD_VERSION.match(version))


def is_amd_package(maintainer: str, version: str) -> bool:
    """Whether a package comes from AMD's repositories (never a stray)."""
    return bool(AMD_MAINTAINER.search(maintainer)) or is_amd_version(version)


def is_distro_rocm(source: str, maintainer: str, version: str) -> bool:
    """Whether a package with this source name, maintainer and version is a distro-archive ROCm package."""
    return source in DISTRO_ROCM_SOURCES and not is_amd_package(maintainer, version)
