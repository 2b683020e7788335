"""Text from a venv's owner never reaches an admin as control (issue 26, item 4), through the real output paths: the
report read back from the verifier's output (roles/verification/reports.py), the line a failed host is failed with
(what pyinfra prints to the admin's terminal), the summary's Markdown and HTML, and the status task's row from a kept
report. The hostile text is in the reasons and the evidence, where a probe's error text lands."""

from __future__ import annotations

import json
import re

import pytest

from roles.status.model import outcome_of
from roles.verification.host_row import VERIFIED, HostOutcome, row_for
from roles.verification.reports import failure_line, parse_check_output
from roles.verification.summary import html_of, markdown_of
from tests.support.report_samples import edited, output, sample_report
from tests.support.standins.hostile_probe_text.sitecustomize import HOSTILE
from tests.support.verify_runs import cached_check, check_by_id, torch_cpu_venv
from verify.report.kept_files import read_kept_files


def _controls(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029"]


def _active_markdown(markdown: str) -> list[str]:
    """Markdown syntax a viewer would act on: `<`, `>`, `[`, `]`, `!` not escaped with a backslash."""
    return re.findall(r"(?<!\\)[<>\[\]!]", markdown.replace("\\\\", ""))


def _hostile_report() -> dict:
    """A failing report whose runtime.torch reason and evidence carry the hostile text (as the probe reports it)."""

    def plant(report):
        check = next(c for c in report["checks"] if c["id"] == "runtime.torch")
        check.update(status="fail", reason=f"import torch failed: RuntimeError: {HOSTILE}")
        check["evidence"] = {"errors": {"import torch": HOSTILE, HOSTILE: "a key too"}}
        report.update(verdict="fail", reason=f"runtime.torch: import torch failed: RuntimeError: {HOSTILE}")

    return edited(sample_report({"runtime.torch": "fail"}), plant)


def _assert_inert_everywhere(run_report, host="ws1") -> None:
    line = failure_line(host, run_report, None)
    assert _controls(line) == [], line
    row = row_for(HostOutcome(host, VERIFIED, run_report.report))
    markdown = markdown_of([row], title="t", generated_at="now")
    assert _controls(markdown) == [] and _active_markdown(markdown) == [], markdown
    assert "\\\\x1b" in markdown and "52;c;" in markdown  # there, as visible escapes
    page = html_of([row], title="t", generated_at="now")
    assert _controls(page.replace("\t", "")) == [] and "<img src=x" not in page and "&lt;img src=x" in page


def test_the_verifiers_output_is_read_with_its_text_inert_in_every_output():
    report = _hostile_report()
    run = parse_check_output(output(report, 1))
    assert run.report is not None, run.error
    line = failure_line("ws1", run, None)
    assert "\\x1b[2K" in line and "\\x07" in line and "\\u2028" in line, line
    _assert_inert_everywhere(run)


def test_a_kept_report_is_read_by_the_status_task_with_its_text_inert(tmp_path):
    root = tmp_path / "rocm-fleet"
    root.mkdir()
    (root / "last-verify.json").write_text(json.dumps(_hostile_report()))
    outcome = outcome_of("ws1", dict(read_kept_files(str(root)), hostname="ws1"))
    row = row_for(outcome)
    markdown = markdown_of([row], title="t", generated_at="now")
    assert row.verdict == "FAIL" and "\\x1b]52" in row.reason and _controls(row.reason) == []
    assert _controls(markdown) == [] and _active_markdown(markdown) == [], markdown


@pytest.mark.slow
def test_a_real_probe_whose_owner_makes_its_error_hostile_reaches_the_admin_inert():
    """The real verifier and the real probe in the torch-cpu venv; the venv's owner's sitecustomize makes `import
    torch` fail with hostile text. The report the verifier prints carries the text as the probe saw it (JSON escapes
    it, nothing is lost); every reader after that gets it inert."""
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu", standin="hostile_probe_text")
    assert report is not None, done.stderr[-2000:]
    first_line = HOSTILE.split("\r")[0].strip()
    assert first_line in check_by_id(report, "runtime.torch")["reason"]
    run = parse_check_output(output(report, done.returncode, hostname=report["host"]["hostname"]))
    assert run.report is not None, run.error
    _assert_inert_everywhere(run)
