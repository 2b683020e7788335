"""A small, schema-valid report built the way the verifier builds one, for tests of what reads reports back."""

from __future__ import annotations

from verify.report.report import PASS, CheckResult, Facts, HostInfo, Report, Request, build_report

HOST = HostInfo("ws1", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "x86_64", "3.11.2")
REQUEST = Request("/opt/rocm-fleet/venv", "7.2.4", "0.50.1", "auto", True, False, "/")
FACTS = Facts(rocm="7.2.4-93", torch="2.13.0+rocm7.2", torch_hip="7.2.53211", bitsandbytes="0.50.1",
              bnb_library="libbitsandbytes_rocm72.so", gpus=(), device_mode="gpu", linkage=None, strays=None, nf4=())


def built_report(checks: list[CheckResult] | None = None, status: str = PASS) -> Report:
    """A report of `checks` (default: one strays check with `status`)."""
    checks = checks or [CheckResult("strays", "stray distro ROCm packages", status, f"strays: {status}")]
    return build_report(host=HOST, request=REQUEST, facts=FACTS, checks=checks, generated_at="2026-11-29T18:00:00Z",
                        tool_version="0.1.0")
