"""Every check for one host, in order, into one report: `python -m verify check`'s engine.

`CHECKS` is the list, in the order of the report; each module's `run(host)` returns its CheckResults:
1. `linkage` — static linkage of python → torch → bitsandbytes' library, before anything is imported;
2. `versions` — installed versions; `strays` — stray distro ROCm packages;
3. `runtime` — the probe in the venv (torch, GPUs, bitsandbytes' library), `maps` — what the probe really mapped
   against the static prediction; 4. `nf4` — the NF4 smoke on each device.
The static checks read files only; the runtime ones share one run of the venv's python (none with --static-only).
What several checks need (one view of the host's files, dpkg's packages, the probe …) is in `host.py`.
"""

from __future__ import annotations

import platform
import posixpath
import socket
import time

from verify.checks import linkage, maps, nf4, runtime, strays, versions
from verify.checks.host import CheckOptions, Host
from verify.ld.fsview import FileSystemView
from verify.report.report import (
    CheckResult,
    Facts,
    Gpu,
    HostInfo,
    Nf4Run,
    Report,
    Request,
    StatusLine,
    build_report,
)
from verify.stack.gpu_arch import arch_supported, base_arch
from verify.stack.venv_layout import dist_version, torch_version_module

TOOL_VERSION = "0.1.0"

CHECKS = (linkage, versions, strays, runtime, maps, nf4)


def run_checks(options: CheckOptions) -> Report:
    """Every check, into one report. Raises venv_layout.VenvError for a --venv that is not a venv."""
    host = Host(options)
    checks = [result for check in CHECKS for result in check.run(host)]
    request = Request(
        venv=str(options.venv),
        expect_rocm=options.expect_rocm,
        expect_bitsandbytes=options.expect_bitsandbytes,
        device=options.device,
        gpu_required=options.gpu_required,
        static_only=options.static_only,
        root=str(options.root),
        torch_label=options.torch_label,
    )
    return build_report(
        host=host_info(host.view),
        request=request,
        facts=_facts(host, checks),
        checks=checks,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        tool_version=TOOL_VERSION,
    )


def host_info(view: FileSystemView) -> HostInfo:
    pretty = None
    try:
        for line in view.local("/etc/os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return HostInfo(socket.gethostname(), pretty, platform.release(), platform.machine(), platform.python_version())


def _facts(host: Host, checks: list[CheckResult]) -> Facts:
    """What the fleet summary shows, one value per column."""
    options, venv = host.options, host.venv
    probe = runtime.probe(host)
    choice = linkage.inputs(host).choice
    data = (probe.data if probe else None) or {}
    torch_rt = data.get("torch") or {}
    bnb_rt = data.get("bitsandbytes") or {}
    gpus = None
    if probe is not None:
        archs = host.release.gpu_archs
        gpus = tuple(Gpu(d.get("index"), d.get("name"), base_arch(d.get("arch")), arch_supported(d.get("arch"), archs))
                     for d in torch_rt.get("devices") or [])
    nf4_runs = tuple(
        Nf4Run(check.evidence.get("device"), check.status, check.evidence.get("roundtrip_mean_abs_error"),
               bool(check.evidence.get("gpu_pass")))
        for check in checks if check.id.startswith("nf4.") and check.evidence
    )
    if probe is None:
        mode = "none"
    elif options.device == "cpu" or not (torch_rt.get("devices")):
        mode = "cpu"
    else:
        mode = "gpu"
    linkage_check = next((c for c in checks if c.id == "linkage.static"), None)
    return Facts(
        rocm=versions.rocm_info_version(host.view),
        torch=dist_version(venv.site_packages, "torch"),
        torch_hip=torch_version_module(venv.site_packages).get("hip"),
        bitsandbytes=dist_version(venv.site_packages, "bitsandbytes"),
        bnb_library=posixpath.basename(bnb_rt.get("library_file") or "") or (choice.name if choice else None),
        gpus=gpus,
        device_mode=mode,
        linkage=(StatusLine(linkage_check.status, linkage_check.reason, linkage_check.evidence.get("short"))
                 if linkage_check else None),
        strays=strays.facts(host),
        nf4=nf4_runs,
    )
