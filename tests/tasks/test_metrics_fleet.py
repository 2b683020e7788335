"""rocm_fleet.prom proven with Debian's real tools, on a local Debian 12 workstation (tests/tasks/conftest.py: ws1,
deployed for real with `prometheus-node-exporter` and `prometheus` installed from Debian's archive first): the file the
verifier and the apt hook wrote passes `promtool check metrics`, and a real node_exporter started inside the host on a
free loopback port, with only its textfile collector, serves the series over HTTP. It is stopped afterwards, also
when the test fails (and the fleet's teardown stops every process left in the host)."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest
import requests

from localfleet.ports import LOOPBACK, free_port, is_listening
from localfleet.procs import stop_processes
from tests.support.fleet_deploy import deploy

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"  # Debian's, and the default of node_exporter_textfile_dir
PROM = f"{TEXTFILE_DIR}/rocm_fleet.prom"


def test_the_verification_and_the_apt_hook_wrote_their_series(kept_fleet):
    text = (kept_fleet.fleet.host("ws1").root / PROM.lstrip("/")).read_text()
    lines = text.splitlines()
    assert 'rocm_fleet_passed{source="verification"} 0' in lines
    assert 'rocm_fleet_check_status{source="verification",check="linkage.static",status="fail"} 1' in lines
    assert 'rocm_fleet_check_status{source="apt_hook",check="linkage.static",status="fail"} 1' in lines
    assert 'rocm_fleet_gpus{source="verification"} 0' in lines  # the CPU run saw no GPU
    assert any(
        line.startswith('rocm_fleet_nf4_roundtrip_mean_abs_error{source="verification",device="cpu"} 0.07')
        for line in lines
    )
    assert 'rocm_fleet_verifier_info{source="verification",version="0.1.0"} 1' in lines


def test_promtool_check_metrics_accepts_the_file(kept_fleet):
    host = kept_fleet.fleet.host("ws1")
    text = (host.root / PROM.lstrip("/")).read_text()
    done = host.run(["promtool", "check", "metrics"], input=text, check=False)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stdout + done.stderr
    # promtool is not a rubber stamp: a counter without _total and a sample before its TYPE are findings.
    bad = host.run(
        ["promtool", "check", "metrics"], input="# HELP x_count a\n# TYPE x_count counter\nx_count 1\n", check=False
    )
    assert bad.returncode != 0 and 'counter metrics should have "_total" suffix' in bad.stdout + bad.stderr


def test_a_real_node_exporter_serves_the_series_over_loopback(kept_fleet):
    host = kept_fleet.fleet.host("ws1")
    port = free_port()
    process = subprocess.Popen(
        host.command(
            [
                "prometheus-node-exporter",
                f"--web.listen-address={LOOPBACK}:{port}",
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={TEXTFILE_DIR}",
            ]
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not is_listening(port):
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "node_exporter did not listen within 60 s"
            time.sleep(0.1)
        scraped = requests.get(f"http://{LOOPBACK}:{port}/metrics", timeout=30).text.splitlines()
    finally:
        stop_processes([process.pid])
        process.wait()
    assert 'rocm_fleet_passed{source="verification"} 0' in scraped
    assert 'rocm_fleet_verdict{source="apt_hook",verdict="fail"} 1' in scraped
    # node_exporter read the file without complaint.
    assert "node_textfile_scrape_error 0" in scraped
    # On a booted host nsenter's child gets its SIGKILL (pdeathsig) after nsenter has been reaped: wait for the port
    # to close, as the condition, under a hang cap.
    deadline = time.monotonic() + 60
    while is_listening(port):
        assert time.monotonic() < deadline, f"node_exporter still listens on {port} 60 s after it was stopped"
        time.sleep(0.05)


def test_with_the_setting_none_the_verification_leaves_the_file_alone(kept_fleet, tmp_path):
    host = kept_fleet.fleet.host("ws1")
    path = host.root / PROM.lstrip("/")
    before = path.stat().st_mtime_ns
    # None is inventory data (pyinfra's --data would pass the string 'None'): a copy of the fleet's inventory says it.
    inventory = tmp_path / "inventory.py"
    inventory.write_text(
        re.sub(
            r"^(\s*)'reports_dir': (.*),$",
            r"\1'reports_dir': \2,\n\1'node_exporter_textfile_dir': None,",
            kept_fleet.fleet.inventory.read_text(),
            count=1,
            flags=re.MULTILINE,
        )
    )
    assert "'node_exporter_textfile_dir': None," in inventory.read_text()
    run = deploy(inventory, "tasks/verify.py", limit="ws1")
    assert run.returncode == 1 and "[ws1] ws1: verification failed" in run.log, run.explain()
    assert path.stat().st_mtime_ns == before
