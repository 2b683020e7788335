"""roles/boot_check/model.py: the unit, validated by systemd's own `systemd-analyze verify` (systemd 252 on this
machine; no systemd runs here as PID 1, and none can in the test fleet's chroots — the unit's command is run by hand
there, tests/tasks/test_day2_fleet.py): the unit alone, and the boot transaction of multi-user.target with the unit
enabled the way the stage enables it (no ordering cycle; a unit ordered Before= it shows one)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from roles.boot_check.model import UNIT_NAME, boot_check_arguments, exec_start, start_limit_s, unit_text
from roles.settings import check_data
from roles.verification.deploy import check_arguments
from roles.verifier import TOP, not_installed_line, stale_line, verifier_command
from verify.cli import build_parser

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
    )
    for units in ([str(tmp_path / UNIT_NAME)], ["multi-user.target"]):
        done = _verify(tmp_path, text, *units)
        assert (done.returncode, done.stdout + done.stderr) == (0, ""), units


def test_what_systemd_analyze_would_catch(tmp_path):
    """The validation can fail: an ordering cycle, and a command systemd cannot execute."""
    text = unit_text("/usr/bin/python3", _arguments())
    cycle = text.replace("After=multi-user.target", "After=multi-user.target\nBefore=multi-user.target")
    assert "Found ordering cycle" in _verify(tmp_path, cycle, "multi-user.target").stderr
    missing = text.replace("ExecStart=/bin/sh", "ExecStart=/nonexistent/sh")
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
    assert arguments[-8:] == [
        "--timeout",
        "900",
        "--model-timeout",
        "600",
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
    # systemd's quoting: /bin/sh -c and the verifier's command as one word, its specifiers and variables escaped.
    script = verifier_command(*arguments, python="/usr/bin/python3", pinned=False, prefix="rocm-fleet boot check:")
    assert _systemd_words(exec_start("/usr/bin/python3", arguments)) == ["/bin/sh", "-c", script]
    assert "'torch 2.13.0 CPU, stand-in'" in script
    assert "'a%%b$$c'" in exec_start("/usr/bin/python3", ["a%b$c"])  # escaped for systemd, quoted for sh


def _systemd_words(line: str) -> list[str]:
    """ExecStart's words as systemd splits them (double quotes, backslash escapes), its %% and $$ unescaped."""
    return [word.replace("%%", "%").replace("$$", "$") for word in shlex.split(line)]


def test_the_unit_runs_nothing_unless_the_launcher_is_the_one_the_deploy_installed(tmp_path):
    """ExecStart, as systemd splits it, run by the real sh against a directory standing in for the verifier's: none
    there, or a launcher of another checkout's, fails the unit with one line in the journal, and runs nothing."""
    top = tmp_path / "verifier"
    words = [word.replace(TOP, str(top)) for word in _systemd_words(exec_start("/usr/bin/python3", ["boot-check"]))]
    assert words[:2] == ["/bin/sh", "-c"]
    done = subprocess.run(words, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (
        3,
        not_installed_line("rocm-fleet boot check:").replace(TOP, str(top)) + "\n",
    )
    top.mkdir()
    (top / "launcher.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    done = subprocess.run(words, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (3, stale_line("rocm-fleet boot check:").replace(TOP, str(top)) + "\n")
    assert not (tmp_path / "ran").exists()


def _limit(text: str) -> int:
    [line] = [line for line in text.splitlines() if line.startswith("TimeoutStartSec=")]
    return int(line.split("=", 1)[1])


def test_the_units_time_limit_is_what_its_own_arguments_allow_the_command_and_a_margin():
    """Issue 26: TimeoutStartSec was a fixed 1200 s, below what the command's own arguments allow (the wait for
    /dev/kfd 120 s + the probe 900 s + the model check 600 s): systemd would kill a check its own limits still let
    run. It is now their sum with the static part's limit (30 s) and a margin (120 s), read by verify's own parser."""
    with_model = _arguments(verify_model="synthetic")
    assert _limit(unit_text("/usr/bin/python3", with_model)) == 120 + 30 + 900 + 600 + 120
    assert _limit(unit_text("/usr/bin/python3", _arguments(verify_model="off"))) == 120 + 30 + 900 + 120
    longer = [*with_model]
    longer[longer.index("--model-timeout") + 1] = "3600"
    longer[longer.index("--driver-wait") + 1] = "300"
    assert start_limit_s(longer) == 300 + 30 + 900 + 3600 + 120
    # What the arguments leave out is the verifier's own default (verify check's --model-timeout: 600 s).
    without = [a for i, a in enumerate(with_model) if "--model-timeout" not in with_model[max(i - 1, 0) : i + 1]]
    assert "--model-timeout" not in without and start_limit_s(without) == start_limit_s(with_model)
    assert start_limit_s([*with_model, "--static-only"]) == 120 + 30 + 900 + 120
