"""Every check for one host, in order, into one report: `python -m verify check`'s engine.

`CHECKS` is the list, in the order of the report. Each is a module with `run(host)`, its CheckResults, and
`facts(host, results)`, the report's facts it knows (what the fleet summary shows):
1. `linkage` — static linkage of python → torch → bitsandbytes' library, before anything is imported;
2. `versions` — installed versions; `strays` — stray distro ROCm packages; `environment` — what a login's
   environment (LD_LIBRARY_PATH, LD_PRELOAD, BNB_ROCM_VERSION) and the venv's amdsmi change; `apt` — AMD's pin and
   lists (with --expect-amd-repo); `kernel` — the amdgpu driver now and after the next boot;
3. `runtime` — the probe in the venv (torch, GPUs, bitsandbytes' library), `maps` — what the probe really mapped
   against the static prediction; 4. `nf4` — the NF4 smoke on each device.
The static checks read files only; the runtime ones share one run of the venv's python (none with --static-only).
What several checks need (one view of the host's files, dpkg's packages, the probe …) is in `host.py`.
"""

from __future__ import annotations

import time

from verify.checks import apt, environment, kernel, linkage, maps, nf4, runtime, strays, versions
from verify.checks.host import CheckOptions, Host
from verify.report.report import Facts, Report, build_report

TOOL_VERSION = "0.1.0"

CHECKS = (linkage, versions, strays, environment, apt, kernel, runtime, maps, nf4)


def run_checks(options: CheckOptions) -> Report:
    """Every check, into one report. Raises venv_layout.VenvError for a --venv that is not a venv,
    rocm_release.UnknownRelease for an --expect-rocm without a release file."""
    host = Host(options)
    checks = [result for check in CHECKS for result in check.run(host)]
    facts = Facts(**{key: value for check in CHECKS for key, value in check.facts(host, checks).items()})
    return build_report(
        host=host.info(),
        request=host.request(),
        facts=facts,
        checks=checks,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        tool_version=TOOL_VERSION,
    )
