"""The whole deploy (`pyinfra INVENTORY deploy.py -y`, the real CLI) on the shared three-host fleet (conftest.py):
what the first run reports on each kind of host, checked against the hosts themselves (dpkg's and apt's own view,
the real loader's `ldd` inside the host), and a second run that changes nothing.

Every host fails verification here, by design (no system ROCm, a CPU torch): the cases differ in *why*.
"""

from __future__ import annotations

import json
import os

import pytest

from localfleet.demo_verdict import judge_host
from tests.e2e.conftest import HOSTS, PLAIN, STANDIN, STRAYS
from tests.support.fleet_deploy import deploy, host_lines, summary_finding, summary_row
from tests.support.standin_rocm_tree import MARKER
from tests.support.verify_runs import check_by_id
from verify.ld.lddview import parse_ldd_output

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

BNB_ROCM72 = "/opt/rocm-fleet/venv/lib/python3.11/site-packages/bitsandbytes/libbitsandbytes_rocm72.so"
CURRENT = "/var/lib/rocm-fleet/verifier/current"
# The verification stage's two operations that run on every pass, by design: the check itself (a command on the host
# that only reads — tests/tasks/test_apt_hook_fleet.py proves with a filesystem snapshot that it changes nothing
# there) and keeping its report on the controller (a python.call, which pyinfra always counts as run; on these hosts
# it fails them, as verification fails).
ALWAYS_RUN = (
    "tasks/verify.py | Verify | Run the verifier: linkage, versions, strays, runtime, NF4 on the CPU (not a GPU pass)",
    "tasks/verify.py | Verify | Save the report, judge the host",
)
# What follows the checkout's verify/: the verifier's install (planned once per host, by the first stage that runs
# the verifier: strays), and the apt hook, which records a new baseline with a new version (roles/apt_hook) — they
# change only when verify/ changed between the two runs (see below).
FOLLOW_THE_VERIFIER = (
    "tasks/strays.py | Strays | Install the verifier",
    "tasks/apt_hook.py | Apt hook | Re-check linkage and strays after every dpkg run "
    "(dpkg post-invoke, apt DPkg::Post-Invoke)",
)


def loader_answers(host, library: str) -> dict[str, str]:
    """NEEDED name -> path (or 'not found'), as glibc's own `ldd` says inside the host: the oracle."""
    done = host.run(["ldd", library], check=False)
    answers = {}
    for line in parse_ldd_output(done.stdout):
        name, _, where = line.strip().partition(" => ")
        if where:
            answers[name] = where
    assert answers, f"ldd {library} in {host.name} printed nothing usable: {done.stdout} {done.stderr}"
    return answers


def test_the_first_deploy_verifies_every_host_and_fails_each_as_expected(deployed):
    first = deployed.first
    assert first.returncode == 1, first.explain()
    # Every host went through every stage to the verifier (none stopped earlier); all failed there, so pyinfra ends
    # with "No hosts remaining!" (and prints no --json results).
    assert "No hosts remaining" in first.log
    for host in HOSTS:
        report = deployed.first_reports[host]
        assert report is not None, f"no report for {host}:\n{first.log[-3000:]}"
        assert any(line.startswith(f"{host}: verification failed — ") for line in host_lines(first.log, host))
    assert "3 host(s): 3 fail" in deployed.first_summary
    # The torch stand-in is marked wherever torch is shown, and named once for all three.
    for host in HOSTS:
        assert "| 2.13.0+cpu † |" in summary_row(deployed.first_summary, host)
    assert "\n† torch on 3 hosts ws[1-3]: torch 2.13.0 CPU, stand-in for the ROCm wheel" in deployed.first_summary


def test_strays_pulled_in_by_apt_are_named_attributed_and_flagged(deployed):
    host = deployed.host(STRAYS)
    # apt's own view: the distro ROCm libraries came in as dependencies, not by hand.
    automatic = set(host.run(["apt-mark", "showauto"]).stdout.split())
    assert {"librocm-smi64-1", "libamdhip64-5", "libhsa-runtime64-1"} <= automatic
    assert {"slurm-wlm-rsmi-plugin", "librocsparse0"} <= set(host.run(["apt-mark", "showmanual"]).stdout.split())

    report = deployed.first_reports[STRAYS]
    strays = {s["package"]: s for s in check_by_id(report, "strays")["evidence"]["strays"]}
    expected = {  # package: (what pulled it in, the ROCm 7.2 SONAMEs it ships)
        "librocm-smi64-1": ("slurm-wlm-rsmi-plugin", ["librocm_smi64.so.1"]),
        "libamdhip64-5": ("librocsparse0", []),
        "libhsa-runtime64-1": ("librocsparse0", ["libhsa-runtime64.so.1"]),
    }
    for package, (puller, sonames) in expected.items():
        assert package in strays, sorted(strays)
        assert puller in strays[package]["pulled_in_by"], strays[package]
        assert strays[package]["rocm_7_2_sonames"] == sonames, strays[package]
    assert strays["libamdhip64-5"]["needed_by"] == ["librocsparse0"]
    assert strays["libhsa-runtime64-1"]["needed_by"] == ["libamdhip64-5"]
    assert report["facts"]["strays"]["binding_risk"] == ["libhsa-runtime64-1", "librocm-smi64-1"]

    # The strays stage said the same in the run's output, one line per package.
    lines = {line.split()[1]: line for line in host_lines(deployed.first.log, STRAYS) if line.startswith("stray: ")}
    assert "pulled in by librocsparse0" in lines["libhsa-runtime64-1"]
    assert "by slurm-wlm-rsmi-plugin" in lines["librocm-smi64-1"]
    for package, soname in (("librocm-smi64-1", "librocm_smi64.so.1"), ("libhsa-runtime64-1", "libhsa-runtime64.so.1")):
        assert lines[package].endswith(f"ships {soname}, a SONAME a ROCm 7.2 consumer could bind to"), lines[package]
    assert "SONAME" not in lines["libamdhip64-5"]  # libamdhip64.so.5: ROCm 7.2 has .so.7
    assert "libhsa-runtime64-1 ⚠" in summary_row(deployed.first_summary, STRAYS)

    # The other hosts have none.
    for other in (PLAIN, STANDIN):
        assert deployed.first_reports[other]["facts"]["strays"]["count"] == 0
        assert not any(line.startswith("stray: ") for line in host_lines(deployed.first.log, other))


def test_a_host_without_system_rocm_fails_because_libhipblas_is_not_found(deployed):
    report = deployed.first_reports[PLAIN]
    linkage = check_by_id(report, "linkage.static")
    assert linkage["status"] == "fail"
    needed = {entry["name"]: entry["outcome"] for entry in linkage["evidence"]["bnb_needed"]}
    assert needed["libhipblas.so.3"] == "not found"
    # The real loader inside the host agrees.
    assert loader_answers(deployed.host(PLAIN), BNB_ROCM72)["libhipblas.so.3"] == "not found"

    reason = report["reason"]
    assert reason.startswith(
        "linkage.static: libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found via "
        "RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib, ld.so.cache, system dirs — install ROCm "
        "7.2.4 (amdgpu-install -y --usecase=rocm --no-dkms)"
    ), reason
    assert "\n" not in reason
    # One line, in the summary (its finding, once, with the hosts that share it; its row names the check) and in
    # the run's output.
    assert summary_finding(deployed.first_summary, PLAIN) == f"**FAIL** linkage.static: {linkage['reason']}"
    assert summary_row(deployed.first_summary, PLAIN).startswith(f"| {PLAIN} | **FAIL** | linkage.static +")
    assert any(
        line.startswith(f"{PLAIN}: verification failed — {reason} (report: ")
        for line in host_lines(deployed.first.log, PLAIN)
    )
    # And it is the result bin/demo calls expected (localfleet/demo_verdict.py), as it is on the strays host.
    assert judge_host(PLAIN, report).expected and judge_host(STRAYS, deployed.first_reports[STRAYS]).expected


def test_a_host_with_a_standin_rocm_tree_passes_the_static_linkage_check(deployed):
    host = deployed.host(STANDIN)
    assert (host.root / f"opt/rocm-7.2.4/{MARKER}").is_file()
    report = deployed.first_reports[STANDIN]
    linkage = check_by_id(report, "linkage.static")
    assert linkage["status"] == "pass", linkage["reason"]
    served = {entry["name"]: entry for entry in linkage["evidence"]["bnb_needed"]}
    assert served["libhipblas.so.3"]["path"] == "/opt/rocm-7.2.4/lib/libhipblas.so.3"
    assert served["libhipblaslt.so.1"]["path"] == "/opt/rocm-7.2.4/lib/libhipblaslt.so.1"
    # The loader inside the host maps the same files, found at the same paths (via /opt/rocm, a link, as the
    # RUNPATH's first element).
    oracle = loader_answers(host, BNB_ROCM72)
    predicted = {obj["requested_as"]: obj["path"] for obj in linkage["evidence"]["rocm_objects"]}
    assert predicted == {name: path for name, path in oracle.items() if path.startswith("/opt/rocm")}, oracle
    assert "| PASS: bitsandbytes' ROCm libraries from ROCm 7.2.4 |" in summary_row(deployed.first_summary, STANDIN)
    # A stand-in tree is not an installed ROCm release: the version check still says there is none.
    assert check_by_id(report, "versions.rocm")["status"] == "fail"
    assert not judge_host(STANDIN, report).expected  # bin/demo would call a passing linkage a surprise


def _verifier_digests(deployed) -> dict[str, str]:
    """The version each host's verifier is (its name is the sha256 of its sources: roles/verifier.py)."""
    return {h: os.readlink(deployed.host(h).root / CURRENT.lstrip("/")) for h in HOSTS}


def test_a_second_run_changes_nothing_on_any_host(deployed, tmp_path):
    before = _verifier_digests(deployed)
    # `_ignore_errors` (pyinfra's global argument, as inventory data) only so that pyinfra prints its --json results:
    # without it, verification fails every host by design and pyinfra ends with "No hosts remaining!" and no JSON.
    # The failing operation is the last one of the run, so the run is otherwise the same; the assertions below
    # check that it is the only one that failed.
    probe = tmp_path / "probe.json"
    run = deploy(deployed.fleet.inventory, "deploy.py", "_ignore_errors=true", probe=probe)
    assert run.results, run.explain()
    assert run.returncode == 0 and run.results["failed_hosts"] == [], run.explain()
    operations = {op["name"]: op for op in run.results["operations"]}
    for name in ALWAYS_RUN:
        assert operations[name]["success"] + operations[name]["error"] == sorted(HOSTS), operations[name]
    assert run.failed_operations == [ALWAYS_RUN[1]], run.explain()

    # Others may edit verify/ in this working tree while the suite runs (in CI the checkout is fixed): a new version
    # of the verifier is then installed, and the hook's baseline recorded again, rightly. Left out only when the
    # version on the hosts really changed.
    exempt = ALWAYS_RUN + (FOLLOW_THE_VERIFIER if _verifier_digests(deployed) != before else ())
    assert [name for name in run.changed_operations if name not in exempt] == [], run.explain()
    assert all(sorted(op["no_change"]) == sorted(HOSTS) for name, op in operations.items() if name not in exempt), (
        run.explain()
    )

    # What each host was asked before the verifier ran (bench/run_probe.py counted it): the stages' facts, read ahead
    # in one command (roles/run_reads.py), and the wheelhouse's hashes, whose file names follow the host's Python —
    # two commands, where asking fact by fact took sixteen.
    if exempt == ALWAYS_RUN:
        recorded = json.loads(probe.read_text())
        calls = recorded["calls"]
        for name in HOSTS:
            asked = sorted(
                (call["phase"], call["stage"], call["kind"], call["what"])
                for call in calls
                if call["host"] == name and call["stage"] != "Verify"
                for _ in range(call["count"])
            )
            assert asked == [
                ("plan", "(top level)", "command", "fact _Batch"),
                ("plan", "Venv", "command", "fact _Batch"),
            ], (name, asked)
            # ... and their commands, which bench/fleet_scale.py's peer "questions alone" runs on their own
            assert len(recorded["batches"][name]) == 2 and all("rocm-fleet-" in c for c in recorded["batches"][name])
