"""What code outside verify/ may use of it: the one module roles/, localfleet/ and bench/ import from the verifier.

Everything else in verify/ is free to move; these names are the contract (tests/test_imports.py holds every import
outside verify/ to this module). The verifier itself never imports this module: it runs from its own packages.
"""

from __future__ import annotations

from pathlib import Path

from verify.checks.apt import pin_text
from verify.debian.apt_policy import parse_preferences, pins_origin
from verify.debian.debversion import compare_versions
from verify.debian.distro_rocm import is_amd_version
from verify.debian.kernels import KernelPackage, installed_kernels, meta_packages, newest, parse_dpkg_query_lines
from verify.debian.strays import Stray, StraysReport, find_strays
from verify.ld.elf import ElfError
from verify.ld.lddview import ldd_lines, parse_ldd_output
from verify.ld.process import Analyser
from verify.report.drift import Drift, compare_reports
from verify.report.report import (
    FAIL,
    PASS,
    RERUN_FIX,
    WARN,
    CheckResult,
    Judgement,
    Report,
    ReportError,
    judge_report,
)
from verify.system.modprobe import Block, blocks_in_cmdline, blocks_in_modprobe_conf
from verify.system.pci_ids import integrated_gpu_name
from verify.stack.rocm_release import (
    CollidingPackage,
    RocmRelease,
    UnknownRelease,
    known_releases,
    release_with_build,
    rocm_release,
)

# The verifier's package directory: roles/verifier.py packs it, data files included, into the zipapp.
PACKAGE_DIR = Path(__file__).resolve().parent

__all__ = [
    "FAIL", "PASS", "RERUN_FIX", "WARN", "PACKAGE_DIR",
    "Analyser", "Block", "CheckResult", "CollidingPackage", "Drift", "ElfError", "Judgement", "KernelPackage",
    "Report", "ReportError", "RocmRelease", "Stray", "StraysReport", "UnknownRelease",
    "blocks_in_cmdline", "blocks_in_modprobe_conf", "compare_reports", "compare_versions", "find_strays",
    "installed_kernels", "integrated_gpu_name", "is_amd_version", "judge_report", "known_releases", "ldd_lines",
    "meta_packages", "newest", "parse_dpkg_query_lines", "parse_ldd_output", "parse_preferences", "pin_text",
    "pins_origin", "release_with_build", "rocm_release",
]
