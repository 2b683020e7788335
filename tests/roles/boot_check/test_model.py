"""roles/boot_check/model.py: the unit, validated by systemd's own `systemd-analyze verify` (systemd 252 on this
machine; no systemd runs here as PID 1, and none can in the test fleet's chroots — the unit's command is run by hand
there, tests/tasks/test_day2_fleet.py): the unit alone, and the boot transaction of multi-user.target with the unit
enabled the way the stage enables it (no ordering cycle; a unit ordered Before= it shows one)."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from roles.boot_check.model import UNIT_NAME, boot_check_arguments, exec_start, unit_text
from roles.settings import check_data
from roles.verification.deploy import check_arguments
from roles.verifier import REMOTE_VERIFIER
from verify.cli import build_parser

SHA = hashlib.sha256(b"verify.pyz").hexdigest()
pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (systemd)")


def _arguments(**data):
    settings, problems = check_data("ws1", data)
    assert problems == ()
    return boot_check_arguments(check_arguments(settings))


def _verify(tmp_path, text: str, *units: str) -> subprocess.CompletedProcess:
    (tmp_path / "multi-user.target.wants").mkdir(exist_ok=True)
    (tmp_path / UNIT_NAME).write_text(text)
    link = tmp_path / "multi-user.target.wants" / UNIT_NAME
    if not link.is_symlink():
        link.symlink_to(f"../{UNIT_NAME}")
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *units],
        capture_output=True,
        text=True,
        env=dict(os.environ, SYSTEMD_UNIT_PATH=f"{tmp_path}:"),
    )


def test_the_unit_verifies_clean_alone_and_in_the_boot_transaction(tmp_path):
    text = unit_text(
        "/usr/bin/python3",
        _arguments(torch_label="torch 2.13.0 CPU, stand-in", verify_device="cpu", gpu_required=False),
        SHA,
    )
    for units in ([str(tmp_path / UNIT_NAME)], ["multi-user.target"]):
        done = _verify(tmp_path, text, *units)
        assert (done.returncode, done.stdout + done.stderr) == (0, ""), units


def test_what_systemd_analyze_would_catch(tmp_path):
    """The validation can fail: an ordering cycle, and a command systemd cannot execute."""
    text = unit_text("/usr/bin/python3", _arguments(), SHA)
    cycle = text.replace("After=multi-user.target", "After=multi-user.target\nBefore=multi-user.target")
    assert "Found ordering cycle" in _verify(tmp_path, cycle, "multi-user.target").stderr
    missing = text.replace("ExecStart=/usr/bin/python3", "ExecStart=/nonexistent/python3")
    done = _verify(tmp_path, missing, str(tmp_path / UNIT_NAME))
    assert done.returncode != 0 and "is not executable" in done.stderr


def test_the_command_is_the_verification_stages_question_once_per_boot():
    arguments = _arguments(torch_label="torch 2.13.0 CPU, stand-in", rocm_install="skip")
    assert arguments[:9] == [
        "boot-check",
        "--venv",
        "/opt/rocm-fleet/venv",
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--device",
        "auto",
    ]
    assert "--json" not in arguments and "--expect-amd-repo" not in arguments
    assert arguments[-6:] == [
        "--timeout",
        "900",
        "--driver-wait",
        "120",
        "--state-dir",
        "/var/lib/rocm-fleet/boot-check",
    ]
    # Root runs the unit; the runtime probe and NF4 — the venv's code — run as its owner, as in the verification.
    owned = _arguments(venv_owner="alice")
    assert owned[owned.index("--probe-user") + 1] == "alice"
    # `check`'s own --keep-in is left out (the boot check keeps its result in its state directory, never as the
    # verification's report); node_exporter's directory is passed on, so the boot check refreshes the metrics too.
    assert "--keep-in" not in arguments
    assert arguments[arguments.index("--metrics-dir") + 1] == "/var/lib/prometheus/node-exporter"
    # verify's own parser takes every argument: one it does not know would fail the unit at every boot.
    parsed = build_parser("boot-check").parse_args(arguments)
    assert parsed.metrics_dir == Path("/var/lib/prometheus/node-exporter") and parsed.torch_label.startswith("torch")
    line = exec_start("/usr/bin/python3", arguments)
    assert '--torch-label "torch 2.13.0 CPU, stand-in"' in line  # systemd's quoting: one word
    assert exec_start("/usr/bin/python3", ["a%b$c"]).endswith('"a%%b$$c"')  # specifiers and variables escaped


def test_the_unit_runs_nothing_unless_the_verifier_is_the_one_the_deploy_installed(tmp_path):
    """ExecStartPre, as systemd would split it, run by the real sh and sha256sum against a file standing in for
    /var/lib/rocm-fleet/verify.pyz: the file the deploy installed passes; a changed (or stale) one fails the unit
    with one line, so ExecStart never runs it."""
    verifier = tmp_path / "verify.pyz"
    verifier.write_bytes(b"the verifier this checkout built")
    installed = hashlib.sha256(verifier.read_bytes()).hexdigest()
    text = unit_text("/usr/bin/python3", _arguments(), installed)
    [line] = [line for line in text.splitlines() if line.startswith("ExecStartPre=")]
    command = [word.replace(REMOTE_VERIFIER, str(verifier)) for word in shlex.split(line.removeprefix("ExecStartPre="))]
    assert command[:2] == ["/bin/sh", "-c"]
    assert subprocess.run(command, capture_output=True, text=True).returncode == 0
    verifier.write_bytes(b"another verifier")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"rocm-fleet boot check: {verifier} is not the verifier the last deploy "
        f"installed (sha256 {installed[:12]}...): deploy again"
    ]
