"""Telling a ROCm/HIP library from any other shared object, by file name or SONAME.

Used to pick, out of everything a Python process maps, the libraries whose origin matters: torch's bundled copies
carry bare names (`libamdhip64.so`, `libhipblas.so`), /opt/rocm-7.2.4 and the distro packages versioned ones
(`libamdhip64.so.7`, `libhsa-runtime64.so.1`). `family` strips the version so that two copies of one library
(torch's and the system's) can be recognised as the same thing.
"""

from __future__ import annotations

import re

# Stems of ROCm's runtime, math and communication libraries (and the kernel-driver interface they ship).
_ROCM = re.compile(
    r"^lib(?:"
    r"amdhip64|hiprtc(?:-builtins)?|amd_comgr|hsa-runtime64|hsakmt|hsa-amd-aqlprofile64|amd_smi|"
    r"hip[a-z_]*|rocm[a-z0-9_\-]*|roc(?:blas|solver|sparse|fft|rand|alution(?:_hip)?|tx64|tracer64)|"
    r"rocprofiler[a-z0-9_\-]*|MIOpen|rccl"
    r")(?:\.so|[-_.]\d)"
)


def is_rocm_library(name: str) -> bool:
    """True for 'libhipblas.so.3', 'libamdhip64.so', '/opt/rocm-7.2.4/lib/librocblas.so.5.0', 'libMIOpen.so.1'."""
    base = name.rsplit("/", 1)[-1]
    return bool(_ROCM.match(base))


def family(name: str) -> str:
    """'libamdhip64.so.7.2.53211' → 'libamdhip64'; '/x/libhipblas.so' → 'libhipblas'."""
    base = name.rsplit("/", 1)[-1]
    return base.split(".so", 1)[0]
