"""roles/status/facts.py: the one command the status task runs on a host, run here for real.

The command is run by /bin/sh as pyinfra runs it, with this machine's bare python3, in a private mount namespace
whose /var/lib/rocm-fleet is a scratch directory the test fills: the kept results, and the verifier installed there as
the deploy installs it (tests/support/installed_verifier.py) — or none, as on a host never provisioned (root: mount
namespaces, and the verifier is root's only)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from roles.status.facts import KeptResults
from roles.verifier import not_installed_line
from tests.support.host_pythons import DEBIAN_PYTHON3, OTHER_PYTHONS, interpreter, path_with
from tests.support.installed_verifier import install
from tests.support.report_samples import sample
from verify.debian.dpkg_log import recent_changes
from verify.report.hook_state import HookResult
from verify.system.boot_id import BOOT_ID

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount namespace; the verifier is root's only")


def kept_files(kept: Path, tail: str = "") -> Path:
    """A host's /var/lib/rocm-fleet with a verification report (text + `tail`) and an apt hook result."""
    (kept / "apt-hook").mkdir(parents=True)
    kept.chmod(0o755)
    report = sample()
    (kept / "last-verify.json").write_text(json.dumps(report.to_json()) + tail)
    (kept / "apt-hook" / "last.json").write_text(json.dumps(HookResult(report.generated_at, report).to_json()))
    return kept


def run_fact(kept: Path, python3: str = DEBIAN_PYTHON3) -> dict:
    """The fact's command on `kept` as the host's /var/lib/rocm-fleet; `python3`: the host's python3."""
    command = KeptResults().command()
    # /var/lib is a tmpfs (root's, 0755, as a host's) inside the namespace: nothing is created on this machine's own.
    script = (
        f"mount -t tmpfs -o mode=755 tmpfs /var/lib && mkdir /var/lib/rocm-fleet && "
        f"mount --bind {shlex.quote(str(kept))} /var/lib/rocm-fleet && {command}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path_with(python3)},
    )
    assert done.returncode == 0, done.stderr
    return KeptResults().process(done.stdout.splitlines())


@pytest.mark.root
@root_only
def test_the_command_reads_what_the_host_keeps_and_nothing_else(tmp_path):
    kept = kept_files(tmp_path / "kept")
    install(kept / "verifier")
    before = recent_changes()
    answer = run_fact(kept)
    files = answer["files"]
    assert json.loads(files["verification"]["text"]) == sample().to_json()
    assert files["verification"]["path"] == "/var/lib/rocm-fleet/last-verify.json"
    assert json.loads(files["apt_hook"]["text"])["kind"] == "rocm-fleet.apt-hook-result"
    assert files["boot_check"] == {"path": "/var/lib/rocm-fleet/boot-check/last.json", "missing": True}
    # What the results cannot see: the running boot (this machine's), and dpkg's log as read here (the namespace's
    # /var/lib is a scratch tmpfs: no dpkg database in it, so no status file's time).
    assert answer["boot_id"] == Path(BOOT_ID).read_text().strip()
    read_here = [{**read, "status_mtime": None} for read in (before, recent_changes())]  # (dpkg may run meanwhile)
    assert answer["dpkg"] in read_here


@pytest.mark.root
@root_only
@pytest.mark.parametrize("minor", sorted(OTHER_PYTHONS))
def test_each_hosts_python3_answers_what_debians_answers(tmp_path, minor):
    """Ubuntu 22.04's 3.10, 24.04's 3.12, 3.13 (tests/support/host_pythons.py) against this machine's 3.11, each with
    the verifier it installed itself."""
    python = interpreter(minor)
    theirs_kept = kept_files(tmp_path / "theirs", '\u2028 caf\u00e9 "\\')
    ours_kept = kept_files(tmp_path / "ours", '\u2028 caf\u00e9 "\\')
    install(theirs_kept / "verifier", python=python)
    install(ours_kept / "verifier")
    theirs, ours = run_fact(theirs_kept, python), run_fact(ours_kept)
    assert "error" not in theirs and theirs["files"]["verification"]["text"].endswith('\u2028 caf\u00e9 "\\')
    assert {**theirs, "now": None} == {**ours, "now": None}


@pytest.mark.root
@root_only
def test_a_host_never_provisioned_says_so_and_a_damaged_verifier_says_why(tmp_path):
    kept = kept_files(tmp_path / "kept")
    assert run_fact(kept) == {
        "error": "never provisioned: no rocm-fleet verifier on the host (/var/lib/rocm-fleet/verifier/launcher.py)",
        "provisioned": False,
    }
    top = install(kept / "verifier")
    (top / os.readlink(top / "current") / "verify" / "cli.py").write_text("raise SystemExit('changed')\n")
    answer = run_fact(kept)
    assert list(answer) == ["error"] and answer["error"].startswith("rocm-fleet verifier: not run - ")
    assert "is not the file its MANIFEST lists" in answer["error"]


def test_what_is_not_an_answer_becomes_one_line():
    fact = KeptResults()
    assert fact.process(['{"now": 1, "files": {}}']) == {"now": 1, "files": {}}
    assert fact.process(["sh: 1: python3: not found"]) == {"error": "sh: 1: python3: not found"}
    assert fact.process([]) == {"error": "no output"}
    assert fact.process(["[1, 2]"]) == {"error": "[1, 2]"}
    assert fact.process(["x" * 1000])["error"] == "x" * 300
    assert fact.process([not_installed_line()])["provisioned"] is False
