"""verify/commands/check.py: `python -m verify check` — exit codes, text output, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from roles.verifier import zipapp_bytes
from tests.support.standin_rocm import VENV, StandinImage
from tests.support.venvs import REPO
from tests.support.verify_runs import cached_check, torch_cpu_venv
from verify.report.report import load_schema


def verify(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify", "check", *arguments], cwd=REPO, capture_output=True,
                          text=True)


def test_usage_errors_exit_2_with_one_line(tmp_path):
    done = verify("--venv", str(tmp_path), "--expect-rocm", "7.2.4")
    assert done.returncode == 2
    assert done.stderr.strip() == f"verify check: {tmp_path}: not a venv (no pyvenv.cfg) — pass the venv's directory, e.g. /opt/rocm-fleet/venv"
    assert verify("--venv", str(tmp_path), "--expect-rocm", "7.2").returncode == 2
    assert verify("--venv", "relative/venv", "--expect-rocm", "7.2.4").returncode == 2
    assert verify("--venv", str(tmp_path), "--expect-rocm", "7.2.4", "--device", "gpu").returncode == 2


def test_all_passed_exits_0_and_prints_one_line_per_check(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    done = verify("--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(": PASS — all 5 checks passed")
    assert [line.split()[0] for line in lines[1:]] == ["PASS"] * 5


@pytest.mark.slow
def test_a_failed_check_exits_1():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    assert report["verdict"] == "fail" and done.returncode == 1


@pytest.mark.slow
def test_the_zipapp_runs_the_same_checks_with_the_systems_bare_python3(tmp_path):
    """What a host runs: verify.pyz (roles/verifier.py builds it) with Debian's /usr/bin/python3, which has no
    pyelftools — the archive carries it, the report schema and the runtime probe's source."""
    python3 = "/usr/bin/python3"
    if subprocess.run([python3, "-c", "import elftools"], capture_output=True).returncode == 0:
        pytest.skip("/usr/bin/python3 has pyelftools installed: it would not prove the archive carries it")
    archive = tmp_path / "verify.pyz"
    archive.write_bytes(zipapp_bytes())
    done = subprocess.run(
        [python3, str(archive), "check", "--venv", str(torch_cpu_venv()), "--expect-rocm", "7.2.4", "--device", "cpu",
         "--no-gpu-required", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["linkage.static"]["reason"].startswith("libhipblas.so.3 (needed by libbitsandbytes_rocm72.so)")
    assert by_id["nf4.cpu"]["status"] == "pass" and by_id["runtime.maps"]["status"] == "pass"
    assert report["host"]["python"].startswith("3.11") and report["request"]["gpu_required"] is False
    jsonschema.validate(report, load_schema())


def test_keep_in_keeps_the_report_on_the_host_and_metrics_dir_writes_the_metrics_from_it(tmp_path):
    """What the verification stage asks (--keep-in /var/lib/rocm-fleet --metrics-dir …): the report kept is the
    report printed, and rocm_fleet.prom carries its verdict."""
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    kept, metrics = tmp_path / "rocm-fleet", tmp_path / "node-exporter"
    kept.mkdir()
    metrics.mkdir()
    done = verify("--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4", "--json",
                  "--keep-in", str(kept), "--metrics-dir", str(metrics))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads((kept / "last-verify.json").read_text()) == json.loads(done.stdout)
    assert sorted(p.name for p in kept.iterdir()) == ["last-verify.json"]  # no temporary file left
    prom = (metrics / "rocm_fleet.prom").read_text()
    assert 'rocm_fleet_passed{source="verification"} 1' in prom.splitlines()


def test_a_report_it_cannot_keep_is_a_warning_not_a_failure(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    done = verify("--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4", "--keep-in",
                  str(tmp_path / "missing"))
    assert done.returncode == 0 and done.stdout.splitlines()[0].endswith(": PASS — all 5 checks passed")
    assert done.stderr == (f"verify check: warning: could not keep the report in {tmp_path / 'missing'} "
                           "(No such file or directory)\n")
    done = verify("--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4", "--metrics-dir", str(tmp_path))
    assert done.returncode == 2 and "--metrics-dir needs --keep-in" in done.stderr
