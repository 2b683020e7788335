"""Reports shaped exactly as `verify check` builds them (verify/report/report.py `build_report`, every check the
verifier always runs), for tests of the rules that judge reports. The real verifier's own reports are used wherever a
test can run it (tests/support/verify_runs.py); these are for the cases no real run produces: a hand-edited or damaged
report, a verdict that contradicts its checks.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

from verify.question import Question
from verify.report.report import CheckResult, Facts, HostInfo, ProbeAccountFacts, Report, build_report

HOSTNAME = "ws1"
REQUEST = {
    "venv": "/opt/rocm-fleet/venv",
    "expect_rocm": "7.2.4",
    "expect_bitsandbytes": "0.50.1",
    "device": "auto",
    "gpu_required": True,
    "static_only": False,
    "root": "/",
    "torch_label": None,
}
STATIC = ("linkage.static", "versions.rocm", "versions.torch", "versions.bitsandbytes", "strays")
RUNTIME = ("runtime.torch", "runtime.devices", "runtime.bnb_library", "runtime.maps", "nf4.cuda0")


FACTS = Facts(
    rocm="7.2.4-93",
    torch="2.13.0+rocm7.2",
    torch_hip="7.2.53211",
    bitsandbytes="0.50.1",
    bnb_library="libbitsandbytes_rocm72.so",
    gpus=(),
    device_mode="gpu",
    linkage=None,
    strays=None,
    nf4=(),
    probe_account=ProbeAccountFacts("alice", 1001, ("alice", "render", "video")),
)


def sample(
    statuses: dict[str, str] | None = None, *, static_only: bool = False, checks: list[CheckResult] | None = None
) -> Report:
    """Every check "pass" unless `statuses` says otherwise ({check id: status}; an id mapped to None is left out);
    `checks`: these instead."""
    statuses = statuses or {}
    ids = STATIC if static_only else STATIC + RUNTIME
    checks = checks or [
        CheckResult(i, i, statuses.get(i, "pass"), f"{i}: {statuses.get(i, 'pass')}")
        for i in ids
        if statuses.get(i, "pass") is not None
    ]
    return build_report(
        host=HostInfo(HOSTNAME, "Ubuntu 24.04.4 LTS", "6.17.0", "x86_64", "3.12.3"),
        request=Question.from_request(dict(REQUEST, static_only=static_only)),
        facts=replace(FACTS, probe_account=None) if static_only else FACTS,
        checks=checks,
        generated_at="2026-11-29T18:00:00Z",
        tool_version="0.1.0",
    )


def sample_report(statuses: dict[str, str] | None = None, *, static_only: bool = False) -> dict[str, Any]:
    """`sample(...)` as the JSON document `verify check` prints."""
    return sample(statuses, static_only=static_only).to_json()


def edited(report: dict[str, Any], change) -> dict[str, Any]:
    """A deep copy of `report` with `change(copy)` applied."""
    copied = copy.deepcopy(report)
    change(copied)
    return copied


def output(report: Any, exit_status: int | None, *, hostname: str = HOSTNAME, text: str | None = None) -> str:
    """stdout of the verification stage's remote command for this report (roles/verification/deploy.py)."""
    body = text if text is not None else json.dumps(report, indent=1)
    tail = "" if exit_status is None else f"rocm-fleet-verify-exit={exit_status}\n"
    return f"rocm-fleet-verify-host={hostname}\n{body}\n{tail}"
