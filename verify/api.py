"""What code outside verify/ may use of it: the one module roles/, localfleet/ and bench/ import from the verifier.

Everything else in verify/ is free to move; these names are the contract (tests/test_imports.py holds every import
outside verify/ to this module). The verifier itself never imports this module: it runs from its own packages.

Each name is imported from its module when it is first used (PEP 562 `__getattr__`), not all of them when this module
is: a task that needs the report reader (the status task) does not pay for the ELF reader, dpkg's database reader
and the checks at every pyinfra start.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for readers and type checkers; at run time they come from _WHERE
    from verify.checks import model_bounds, nf4
    from verify.checks.apt import pin_text
    from verify.checks.model import probe_arguments as model_probe_arguments
    from verify.checks.model import probe_source as model_probe_source
    from verify.checks.runtime import probe_arguments as runtime_probe_arguments
    from verify.checks.runtime import probe_source as runtime_probe_source
    from verify.debian.apt_policy import parse_preferences, pins_origin
    from verify.debian.debversion import compare_versions
    from verify.debian.distro_rocm import is_amd_version
    from verify.debian.kernels import KernelPackage, installed_kernels, meta_packages, newest, parse_dpkg_query_lines
    from verify.debian.strays import Stray, StraysReport, find_strays
    from verify.ld.elf import ElfError
    from verify.ld.lddview import ldd_lines, parse_ldd_output
    from verify.ld.process import Analyser
    from verify.report import host_input
    from verify.report.boot_state import DEFAULT_DIR as BOOT_CHECK_STATE_DIR
    from verify.report.drift import Drift, compare_reports
    from verify.report.host_input import inert
    from verify.report.kept import LABELS as KEPT_LABELS
    from verify.report.kept import KeptResult, Unusable, kept_results, parse_time
    from verify.report.metrics import DEFAULT_DIR as METRICS_DEFAULT_DIR
    from verify.report.report import (
        FAIL,
        PASS,
        RERUN_FIX,
        WARN,
        CheckResult,
        Judgement,
        Report,
        ReportError,
        check_priority,
        judge_report,
    )
    from verify.stack.rocm_release import (
        CollidingPackage,
        RocmRelease,
        UnknownRelease,
        known_releases,
        release_with_build,
        rocm_release,
    )
    from verify.system.modprobe import Block, blocks_in_cmdline, blocks_in_modprobe_conf
    from verify.system.pci_ids import integrated_gpu_name

# name → (module, its name there); None: the module itself.
_WHERE: dict[str, tuple[str, str | None]] = {
    "model_bounds": ("verify.checks.model_bounds", None),
    "nf4": ("verify.checks.nf4", None),
    "pin_text": ("verify.checks.apt", "pin_text"),
    "model_probe_arguments": ("verify.checks.model", "probe_arguments"),
    "model_probe_source": ("verify.checks.model", "probe_source"),
    "runtime_probe_arguments": ("verify.checks.runtime", "probe_arguments"),
    "runtime_probe_source": ("verify.checks.runtime", "probe_source"),
    "parse_preferences": ("verify.debian.apt_policy", "parse_preferences"),
    "pins_origin": ("verify.debian.apt_policy", "pins_origin"),
    "compare_versions": ("verify.debian.debversion", "compare_versions"),
    "is_amd_version": ("verify.debian.distro_rocm", "is_amd_version"),
    **{
        name: ("verify.debian.kernels", name)
        for name in ("KernelPackage", "installed_kernels", "meta_packages", "newest", "parse_dpkg_query_lines")
    },
    **{name: ("verify.debian.strays", name) for name in ("Stray", "StraysReport", "find_strays")},
    "ElfError": ("verify.ld.elf", "ElfError"),
    "ldd_lines": ("verify.ld.lddview", "ldd_lines"),
    "parse_ldd_output": ("verify.ld.lddview", "parse_ldd_output"),
    "Analyser": ("verify.ld.process", "Analyser"),
    "BOOT_CHECK_STATE_DIR": ("verify.report.boot_state", "DEFAULT_DIR"),
    "Drift": ("verify.report.drift", "Drift"),
    "compare_reports": ("verify.report.drift", "compare_reports"),
    "host_input": ("verify.report.host_input", None),
    "inert": ("verify.report.host_input", "inert"),
    "KEPT_LABELS": ("verify.report.kept", "LABELS"),
    **{name: ("verify.report.kept", name) for name in ("KeptResult", "Unusable", "kept_results", "parse_time")},
    "KEPT_STATE_ROOT": ("verify.report.kept_files", "STATE_ROOT"),
    "METRICS_DEFAULT_DIR": ("verify.report.metrics", "DEFAULT_DIR"),
    **{
        name: ("verify.report.report", name)
        for name in (
            "FAIL",
            "PASS",
            "RERUN_FIX",
            "WARN",
            "CheckResult",
            "Judgement",
            "Report",
            "ReportError",
            "check_priority",
            "judge_report",
        )
    },
    **{name: ("verify.system.modprobe", name) for name in ("Block", "blocks_in_cmdline", "blocks_in_modprobe_conf")},
    "integrated_gpu_name": ("verify.system.pci_ids", "integrated_gpu_name"),
    **{
        name: ("verify.stack.rocm_release", name)
        for name in (
            "CollidingPackage",
            "RocmRelease",
            "UnknownRelease",
            "known_releases",
            "release_with_build",
            "rocm_release",
        )
    },
}

# The verifier's package directory: roles/verifier.py packs it, data files included, into the zipapp.
PACKAGE_DIR = Path(__file__).resolve().parent


def _kept_reader_sources() -> tuple[tuple[str, str], ...]:
    """What a host keeps under /var/lib/rocm-fleet, and the reader the status task sends to it as the program of its
    python3: (module name, source) in import order, standard library only; run kept_files' main() once both are
    loaded."""
    modules = (importlib.import_module("verify.safe_read"), importlib.import_module("verify.report.kept_files"))
    return tuple((module.__name__, Path(module.__file__).read_text(encoding="utf-8")) for module in modules)


def __getattr__(name: str) -> Any:
    if name == "KEPT_READER_SOURCES":
        value = _kept_reader_sources()
    elif name in _WHERE:
        module, attribute = _WHERE[name]
        value = importlib.import_module(module)
        value = value if attribute is None else getattr(value, attribute)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: the next use finds it as a plain global
    return value


__all__ = [
    "host_input",
    "inert",
    "FAIL",
    "PASS",
    "RERUN_FIX",
    "WARN",
    "PACKAGE_DIR",
    "BOOT_CHECK_STATE_DIR",
    "KEPT_LABELS",
    "KEPT_READER_SOURCES",  # noqa: F822 — served by __getattr__
    "KEPT_STATE_ROOT",  # noqa: F822 — served by __getattr__
    "METRICS_DEFAULT_DIR",
    "Analyser",
    "Block",
    "CheckResult",
    "CollidingPackage",
    "Drift",
    "ElfError",
    "Judgement",
    "KernelPackage",
    "KeptResult",
    "Report",
    "ReportError",
    "RocmRelease",
    "Stray",
    "StraysReport",
    "UnknownRelease",
    "Unusable",
    "blocks_in_cmdline",
    "blocks_in_modprobe_conf",
    "check_priority",
    "compare_reports",
    "compare_versions",
    "find_strays",
    "installed_kernels",
    "integrated_gpu_name",
    "is_amd_version",
    "judge_report",
    "kept_results",
    "known_releases",
    "ldd_lines",
    "meta_packages",
    "model_bounds",
    "model_probe_arguments",
    "model_probe_source",
    "newest",
    "nf4",
    "parse_dpkg_query_lines",
    "parse_ldd_output",
    "parse_preferences",
    "parse_time",
    "pin_text",
    "pins_origin",
    "release_with_build",
    "rocm_release",
    "runtime_probe_arguments",
    "runtime_probe_source",
]
