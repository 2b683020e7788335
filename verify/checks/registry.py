"""Every check for one host, in order, into one report: `python -m verify check`'s engine.

`CHECKS` is the list, in the order of the report. Each is a module with `run(host)`, its CheckResults, and
`facts(host, results)`, the report's facts it knows (what the fleet summary shows):
1. `linkage` — static linkage of python → torch → bitsandbytes' library, before anything is imported;
2. `versions` — installed versions; `strays` — stray distro ROCm packages; `environment` — what a login's
   environment (LD_LIBRARY_PATH, LD_PRELOAD, BNB_ROCM_VERSION) and the venv's amdsmi change; `apt` — AMD's pin and
   lists (with --expect-amd-repo); `kernel` — the amdgpu driver now and after the next boot;
3. `runtime` — the probe in the venv (torch, GPUs, bitsandbytes' library), `maps` — what the probe really mapped
   against the static prediction; 4. `nf4` — the NF4 smoke on each device; 5. `model` — a 4-bit causal LM through
   Transformers on each device NF4 passed on (with --model synthetic or PATH; its own run of the venv's python).
The static checks read files only (through verify/safe_read.py), within `CheckOptions.static_time_limit`: running out
of time is a failing check, not a hang. The runtime ones (model aside) share one run of the venv's python — none with
--static-only, nor when the static part ran out of time or found a library that is not a regular file (a FIFO would
block the probe's dlopen for ever). What several checks need is in `host.py`.
"""

from __future__ import annotations

import time

from verify.checks import apt, environment, kernel, linkage, maps, model, nf4, runtime, strays, versions
from verify.checks.host import CheckOptions, Host
from verify.report.report import FAIL, STATIC_CHECK_IDS, CheckResult, Facts, Report, build_report
from verify.safe_read import OutOfTime, time_limit

TOOL_VERSION = "0.1.0"

# What this module adds to the static part: a login's environment, AMD's apt pin and lists, the kernel —
# files read, and apt-cache run once with its own time limit (verify/checks/apt.py).
STATIC_CHECKS = (linkage, versions, strays, environment, apt, kernel)
RUNTIME_CHECKS = (runtime, maps, nf4, model)
CHECKS = STATIC_CHECKS + RUNTIME_CHECKS


def run_checks(options: CheckOptions) -> Report:
    """Every check, into one report. Raises venv_layout.VenvError for a --venv that is not a venv,
    rocm_release.UnknownRelease for an --expect-rocm without a release file."""
    host = Host(options)
    try:
        with time_limit(options.static_time_limit):
            checks = [result for check in STATIC_CHECKS for result in check.run(host)]
    except OutOfTime as late:
        checks = _out_of_time(late)
        host.static_stopped = str(late)
        host.runtime_blocked = f"the static check did not finish ({late})"
    checks += [result for check in RUNTIME_CHECKS for result in check.run(host)]
    facts = Facts(**{key: value for check in CHECKS for key, value in check.facts(host, checks).items()})
    return build_report(
        host=host.info(),
        request=host.request(),
        facts=facts,
        checks=checks,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        tool_version=TOOL_VERSION,
    )


def _out_of_time(late: OutOfTime) -> list[CheckResult]:
    reason = (
        f"the static check did not finish: {late} — a workstation's files take well under a second; look at "
        "what it stopped at (a hung mount, a flood of files)"
    )
    return [
        CheckResult(check_id, check_id, FAIL, reason, {"stopped_before": late.doing}) for check_id in STATIC_CHECK_IDS
    ]
