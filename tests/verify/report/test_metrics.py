"""verify/report/metrics.py: the host's kept results as node_exporter textfile metrics.

Checked here line by line against the text format; Debian's real `promtool check metrics` and a real
`prometheus-node-exporter` scraping the file are in tests/tasks/test_metrics_fleet.py.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import replace

from tests.support.fleet_reports import report_of
from verify.report.hook_state import HookResult
from verify.report.kept import KeptResult, Unusable
from verify.report.metrics import FILE_NAME, render_metrics, write_metrics
from verify.report.report import KernelFacts

SAMPLE = re.compile(r'^([a-z_][a-z0-9_]*)\{((?:[a-z_]+="(?:[^"\\\n]|\\.)*",?)*)\} (-?[0-9.e+]+|NaN|[+-]Inf)$')


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(name, labels): value}; asserts every line is a HELP, a TYPE or a sample, and each family is declared first."""
    found, declared = {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            declared.add(line.split()[2])
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labels, value = match.groups()
        assert name in declared, f"{name} has no HELP/TYPE before its samples"
        pairs = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', labels))
        found[(name, pairs)] = float(value)
    return found


def lab(**labels) -> frozenset:
    return frozenset(labels.items())


def test_the_day2_checks_and_the_kernel_that_boots_next():
    """Day 2's checks are series like every other, a pending reboot is one, and so is whether the running kernel and
    the one that boots next have amdgpu.ko — the alert an admin wants before the reboot. A version-1 report (no
    kernel facts) has no such series."""
    report = report_of("ws1", "pass")
    pending = KernelFacts(
        "6.8.0-49-generic",
        "6.8.0-51-generic",
        True,
        True,
        True,
        False,
        ("6.8.0-49-generic", "6.8.0-51-generic"),
        ("6.8.0-51-generic",),
    )
    boot = KeptResult(
        "boot_check", "2026-12-01T08:00:00Z", replace(report, facts=replace(report.facts, kernel=pending))
    )
    old = KeptResult("verification", "2026-12-01T07:00:00Z", replace(report, facts=replace(report.facts, kernel=None)))
    got = samples(render_metrics({"boot_check": boot, "verification": old}))
    b = {"source": "boot_check"}
    assert got[("rocm_fleet_check_status", lab(**b, check="kernel.driver", status="pass"))] == 1
    assert got[("rocm_fleet_check_status", lab(**b, check="apt.pin", status="pass"))] == 1
    assert got[("rocm_fleet_check_status", lab(**b, check="environment.loader", status="pass"))] == 1
    assert got[("rocm_fleet_reboot_pending", lab(**b))] == 1
    assert got[("rocm_fleet_kernel_has_amdgpu", lab(**b, kernel="6.8.0-49-generic", boot="running"))] == 1
    assert got[("rocm_fleet_kernel_has_amdgpu", lab(**b, kernel="6.8.0-51-generic", boot="next"))] == 0
    assert not any(
        name in ("rocm_fleet_reboot_pending", "rocm_fleet_kernel_has_amdgpu")
        and dict(labels)["source"] == "verification"
        for name, labels in got
    )


def test_every_source_gets_its_verdict_checks_gpus_nf4_strays_time_and_version():
    verification = KeptResult("verification", "2026-12-01T17:00:00Z", report_of("ws1", "no_rocm", arch="gfx90a"))
    static = replace(report_of("ws1", "strays"), request=replace(report_of("ws1", "strays").request, static_only=True))
    hook = KeptResult("apt_hook", "2026-12-01T19:00:00Z", static)
    text = render_metrics({"verification": verification, "apt_hook": hook})
    got = samples(text)
    v, h = {"source": "verification"}, {"source": "apt_hook"}
    assert got[("rocm_fleet_passed", lab(**v))] == 0 and got[("rocm_fleet_passed", lab(**h))] == 0
    assert got[("rocm_fleet_verdict", lab(**v, verdict="fail"))] == 1
    assert got[("rocm_fleet_verdict", lab(**v, verdict="pass"))] == 0
    assert got[("rocm_fleet_check_status", lab(**v, check="linkage.static", status="fail"))] == 1
    assert got[("rocm_fleet_check_status", lab(**v, check="linkage.static", status="pass"))] == 0
    assert got[("rocm_fleet_check_status", lab(**h, check="strays", status="fail"))] == 1
    assert got[("rocm_fleet_stray_packages", lab(**h))] == 1 and got[("rocm_fleet_stray_packages", lab(**v))] == 0
    assert got[("rocm_fleet_gpus", lab(**v))] == 1
    assert got[("rocm_fleet_gpu_info", lab(**v, index="0", arch="gfx90a", supported="true"))] == 1
    assert got[("rocm_fleet_nf4_roundtrip_mean_abs_error", lab(**v, device="cuda:0"))] == 0.0727
    assert got[("rocm_fleet_last_run_timestamp_seconds", lab(**h))] == calendar.timegm((2026, 12, 1, 19, 0, 0))
    assert got[("rocm_fleet_verifier_info", lab(**v, version="0.1.0"))] == 1
    assert got[("rocm_fleet_result_usable", lab(**v))] == 1
    # One HELP and TYPE per family, all gauges.
    assert text.count("# HELP rocm_fleet_check_status ") == 1
    assert set(re.findall(r"^# TYPE \S+ (\S+)$", text, flags=re.M)) == {"gauge"}


def test_an_unusable_kept_file_is_a_zero_and_label_values_are_escaped():
    report = report_of("ws1", "pass")
    odd = replace(report, tool_version='0.1"\\\nx')
    text = render_metrics(
        {"verification": KeptResult("verification", "?", odd)},
        [Unusable("apt_hook", "/var/lib/rocm-fleet/apt-hook/last.json", "not JSON")],
    )
    got = samples(text)
    assert got[("rocm_fleet_result_usable", lab(source="apt_hook"))] == 0
    assert ('rocm_fleet_verifier_info{source="verification",version="0.1\\"\\\\\\nx"} 1') in text.splitlines()
    assert not any(name == "rocm_fleet_last_run_timestamp_seconds" for name, _ in got)  # "?" is no time


def test_written_from_what_the_host_keeps_and_only_where_node_exporter_reads(tmp_path):
    root, metrics = tmp_path / "rocm-fleet", tmp_path / "node-exporter"
    (root / "apt-hook").mkdir(parents=True)
    (root / "last-verify.json").write_text(json.dumps(report_of("ws1", "pass").to_json()))
    static = report_of("ws1", "pass")
    (root / "apt-hook" / "last.json").write_text(json.dumps(HookResult("2026-12-01T19:00:00Z", static).to_json()))
    assert write_metrics(metrics, root) is None and not metrics.exists()  # no node_exporter: no file, no error
    metrics.mkdir()
    path = write_metrics(metrics, root)
    assert path == str(metrics / FILE_NAME)
    got = samples((metrics / FILE_NAME).read_text())
    assert got[("rocm_fleet_passed", lab(source="verification"))] == 1
    assert got[("rocm_fleet_passed", lab(source="apt_hook"))] == 1
    assert not any(dict(labels).get("source") == "boot_check" for _, labels in got)  # none kept: no series
    assert [p.name for p in metrics.iterdir()] == [FILE_NAME]
