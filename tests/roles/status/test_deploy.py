"""roles/status/deploy.py: what the status task costs at every pyinfra start — the modules it loads.

The task runs once per `pyinfra INVENTORY tasks/status.py`; pyinfra compiles the project's modules from source on
every run (its CLI sets sys.dont_write_bytecode), so each module the task imports is paid for each time. Reading and
judging kept reports and writing the summary needs the report reader, its schema, the release data and the command
that runs the installed verifier's launcher — not the ELF reader, dpkg's database or the checks. (The task itself,
over SSH: tests/tasks/test_status_fleet.py; its cost against pyinfra's floor: bench/status_scale.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.fleet_reports import report_of
from tests.support.venvs import REPO

# What the status task does in one process: import what tasks/status.py imports, read one host's kept report into its
# outcome, make its row and write both files of the summary.
RUN = """
import json, sys
import roles.settings, roles.status.deploy
from roles.status.model import outcome_of
from roles.verification.host_row import row_for
from roles.verification.summary import render_markdown
from roles.verification.summary import render_html
answer = {"hostname": "ws1", "now": 1796155200.0,
          "files": {"verification": {"path": "/var/lib/rocm-fleet/last-verify.json", "text": sys.argv[1]}}}
outcome = outcome_of("ws1", answer)
row = row_for(outcome)
render_markdown([outcome], title="t", generated_at="now"), render_html([outcome], title="t", generated_at="now")
print(json.dumps({"verdict": row.verdict, "modules": sorted(sys.modules)}))
"""
NOT_NEEDED = (
    "elftools.",  # the ELF reader (its package's own __init__ is empty: roles/verifier.py finds its files by it)
    "verify.ld",
    "verify.debian",
    "verify.checks",
    "verify.commands",
    "verify.system",
    "roles.verification.deploy",
    "roles.verification.reports",
)


def test_the_status_task_loads_no_elf_reader_no_dpkg_reader_and_no_checks():
    report = report_of("ws1", "pass", at="2026-12-01T17:00:00Z")
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(report.to_json())], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["verdict"] == "PASS"  # the whole way, with the report judged by the one rule
    loaded = [m for m in found["modules"] if m.split(".")[0] in ("verify", "roles", "elftools")]
    assert [m for m in loaded if m.startswith(NOT_NEEDED)] == []
    assert "verify.report.report" in loaded and "verify.report.schema_check" in loaded
