"""roles/status/facts.py: the one command the status task runs on a host, run here for real.

The command is run by /bin/sh as pyinfra runs it, with this machine's bare python3, in a private mount namespace
whose /var/lib/rocm-fleet is a scratch directory the test fills (root: mount namespaces)."""

from __future__ import annotations

import ast
import base64
import json
import os
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from roles.status.facts import KEPT_READER_SOURCES, PROGRAM, KeptResults
from tests.support.host_pythons import OTHER_PYTHONS, interpreter, path_with
from tests.support.report_samples import sample
from verify.report.hook_state import HookResult


def run_fact(kept: Path, python3: str | None = None) -> dict:
    """The fact's command on `kept` as the host's /var/lib/rocm-fleet; `python3`: the host's python3 (default: this
    machine's, from PATH)."""
    command = KeptResults().command()
    # /var/lib is a tmpfs inside the namespace: nothing is created on this machine's own /var/lib.
    script = (
        f"mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/rocm-fleet && "
        f"mount --bind {shlex.quote(str(kept))} /var/lib/rocm-fleet && {command}"
    )
    env = None if python3 is None else {**os.environ, "PATH": path_with(python3)}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return KeptResults().process(done.stdout.splitlines())


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount namespace")
def test_the_command_reads_what_the_host_keeps_and_nothing_else(tmp_path):
    kept = tmp_path / "kept"
    (kept / "apt-hook").mkdir(parents=True)
    report = sample()
    (kept / "last-verify.json").write_text(json.dumps(report.to_json()))
    (kept / "apt-hook" / "last.json").write_text(json.dumps(HookResult(report.generated_at, report).to_json()))
    answer = run_fact(kept)
    files = answer["files"]
    assert json.loads(files["verification"]["text"]) == report.to_json()
    assert files["verification"]["path"] == "/var/lib/rocm-fleet/last-verify.json"
    assert json.loads(files["apt_hook"]["text"])["kind"] == "rocm-fleet.apt-hook-result"
    assert files["boot_check"] == {"path": "/var/lib/rocm-fleet/boot-check/last.json", "missing": True}


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount namespace")
@pytest.mark.parametrize("version", sorted(OTHER_PYTHONS))
def test_each_hosts_python3_answers_what_debians_answers(tmp_path, version):
    """Ubuntu 22.04's 3.10, 24.04's 3.12, 3.13 (tests/support/host_pythons.py) against this machine's 3.11."""
    kept = tmp_path / "kept"
    (kept / "apt-hook").mkdir(parents=True)
    report = sample()
    (kept / "last-verify.json").write_text(json.dumps(report.to_json()) + '\u2028 caf\u00e9 "\\')
    (kept / "apt-hook" / "last.json").write_text(json.dumps(HookResult(report.generated_at, report).to_json()))
    theirs, ours = run_fact(kept, interpreter(version)), run_fact(kept)
    assert "error" not in theirs and theirs["files"]["verification"]["text"].endswith('\u2028 caf\u00e9 "\\')
    assert {**theirs, "now": None} == {**ours, "now": None}


def test_the_command_is_the_kept_files_reader_itself_run_by_the_systems_bare_python3(tmp_path):
    """What a host runs: its own python3, isolated, no site — from a directory with no verify/ in it — loading the
    sent sources (kept_files.py and safe_read.py, as they are in this checkout) and nothing else of the verifier."""
    command = KeptResults().command()
    assert command.startswith("python3 -I -S -c ") and command.endswith(" 2>&1 || true")
    for name, source in KEPT_READER_SOURCES:
        packed = base64.b64encode(zlib.compress(source.encode("utf-8"), 9)).decode("ascii")
        assert f"('{name}', '{packed}')" in PROGRAM
    python3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    probe = PROGRAM.replace("sys.exit(m.main([]))", "print(sorted(k for k in sys.modules if k.startswith('verify')))")
    done = subprocess.run([python3, "-I", "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.stdout.strip() == "['verify.report.kept_files', 'verify.safe_read']", done.stderr
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    answer = KeptResults().process(done.stdout.splitlines())
    assert set(answer["files"]) == {"verification", "apt_hook", "boot_check"} and "hostname" in answer


def test_the_program_imports_nothing_reading_does_not_need(tmp_path):
    """Every host runs it at every status: no socket (uname gives the host's name), no secrets (only replace_file,
    which the status never calls, makes a private name), no base64 (binascii, built in, unpacks the sources), no
    typing or contextlib (about 8 ms of the program's 30 ms inside a local fleet host), and no json package — it
    prints with kept_files.json_text — nor the re and enum that json imports (7 ms of the program's 18 ms)."""
    python3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    probe = PROGRAM.replace("sys.exit(m.main([]))", "m.main([]); sys.stderr.write(repr(sorted(sys.modules)))")
    done = subprocess.run([python3, "-I", "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert set(KeptResults().process(done.stdout.splitlines())["files"]) == {"verification", "apt_hook", "boot_check"}
    loaded = set(ast.literal_eval(done.stderr))
    assert {"verify.report.kept_files", "verify.safe_read"} <= loaded
    assert loaded.isdisjoint(
        {"socket", "secrets", "base64", "hashlib", "random", "typing", "contextlib", "json", "re", "enum"}
    )


def test_what_is_not_an_answer_becomes_one_line():
    fact = KeptResults()
    assert fact.process(['{"now": 1, "files": {}}']) == {"now": 1, "files": {}}
    assert fact.process(["sh: 1: python3: not found"]) == {"error": "sh: 1: python3: not found"}
    assert fact.process([]) == {"error": "no output"}
    assert fact.process(["[1, 2]"]) == {"error": "[1, 2]"}
    assert fact.process(["x" * 1000])["error"] == "x" * 300
