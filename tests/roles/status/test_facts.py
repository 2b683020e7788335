"""roles/status/facts.py: the one command the status task runs on a host, run here for real.

The command is run by /bin/sh as pyinfra runs it, with this machine's bare python3, in a private mount namespace
whose /var/lib/rocm-fleet is a scratch directory the test fills (root: mount namespaces)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from roles.status.facts import PROGRAM, KeptResults
from tests.support.reports import built_report
from verify.api import KEPT_FILES_SOURCE
from verify.report.hook_state import HookResult


def run_fact(kept: Path) -> dict:
    command = KeptResults().command()
    # /var/lib is a tmpfs inside the namespace: nothing is created on this machine's own /var/lib.
    script = (f"mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/rocm-fleet && "
              f"mount --bind {shlex.quote(str(kept))} /var/lib/rocm-fleet && {command}")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return KeptResults().process(done.stdout.splitlines())


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount namespace")
def test_the_command_reads_what_the_host_keeps_and_nothing_else(tmp_path):
    kept = tmp_path / "kept"
    (kept / "apt-hook").mkdir(parents=True)
    report = built_report()
    (kept / "last-verify.json").write_text(json.dumps(report.to_json()))
    (kept / "apt-hook" / "last.json").write_text(json.dumps(HookResult(report.generated_at, report).to_json()))
    answer = run_fact(kept)
    files = answer["files"]
    assert json.loads(files["verification"]["text"]) == report.to_json()
    assert files["verification"]["path"] == "/var/lib/rocm-fleet/last-verify.json"
    assert json.loads(files["apt_hook"]["text"])["kind"] == "rocm-fleet.apt-hook-result"
    assert files["boot_check"] == {"path": "/var/lib/rocm-fleet/boot-check/last.json", "missing": True}


def test_the_command_is_the_kept_files_reader_itself_in_isolated_mode():
    command = KeptResults().command()
    assert command.startswith("python3 -I -S -c ") and command.endswith(" 2>&1 || true")
    namespace: dict = {"__name__": "not-main"}  # the packed program, unpacked, is kept_files.py as it is
    exec(PROGRAM.replace("exec(", "namespace_source=(", 1), namespace)
    assert namespace["namespace_source"].decode() == KEPT_FILES_SOURCE


def test_what_is_not_an_answer_becomes_one_line():
    fact = KeptResults()
    assert fact.process(['{"now": 1, "files": {}}']) == {"now": 1, "files": {}}
    assert fact.process(["sh: 1: python3: not found"]) == {"error": "sh: 1: python3: not found"}
    assert fact.process([]) == {"error": "no output"}
    assert fact.process(["[1, 2]"]) == {"error": "[1, 2]"}
    assert fact.process(["x" * 1000])["error"] == "x" * 300
