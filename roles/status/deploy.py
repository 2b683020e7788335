"""The status task as a stage: one fact per host (roles/status/facts.py), no operation, nothing changed.

The fact is read while pyinfra plans, so the status is known before pyinfra's prompt; the summary is written when the
run ends, for `--dry` too (roles/verification/fleet.py, `FleetSummary.for_status`): reports/status.md and
reports/status.html, the same summary a verification run writes, each host "as of" the results it keeps.
"""

from __future__ import annotations

from pyinfra import host, logger, state

from roles.settings import HostSettings
from roles.stage import stage
from roles.status.facts import KeptResults
from roles.status.model import outcome_of
from roles.verification.fleet import fleet_summary, reports_dir_for
from roles.verifier import question_for

_COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}


@stage("Status")
def status(settings: HostSettings) -> None:
    summary = fleet_summary(state, reports_dir_for(settings), status=True)
    outcome = outcome_of(
        host.name,
        host.get_fact(KeptResults),
        settings.torch_label,
        request=question_for(settings).to_request(),
        max_result_age=settings.max_result_age,
        boot_check=settings.boot_check,
    )
    summary.record(outcome)
    row = summary.row_of(outcome)
    as_of = f" (as of {row.as_of})" if outcome.as_of else ""
    host.log_styled(
        f"status {row.verdict}{as_of}: {row.reason}",
        fg=_COLOURS.get(row.verdict, "white"),
        log_func=logger.warning if row.verdict not in ("PASS", "WARN") else logger.info,
    )
