"""Writing the fleet summary once the run is over, whatever happened to the hosts.

pyinfra 3.10 has no "after all hosts" hook for deploy code (the 2.x `@hook`s are gone), so this is a state callback
handler (`BaseStateCallback`), registered by the verification deploy the first time it is planned:

- `host_disconnect` is the one callback pyinfra fires for every connected host at the very end, also when the run
  aborts (the CLI disconnects in a `finally`, e.g. after "No hosts remaining!" when every host failed) — the
  `operation_end` of the last operation is skipped in exactly that case, which is the case a summary matters most;
  when the last connected host has disconnected, the summary is written (again, if a server.reboot disconnected
  everyone earlier: the last write wins);
- `operation_host_error` remembers where a host failed, for hosts that never reached verification.
Hosts in the run that never connected are marked unreachable. Nothing is written for `--dry` (nothing executed).
A small wrapper script around `pyinfra` would also work, but would not run for the plain
`pyinfra INVENTORY tasks/verify.py` that re-verifies a fleet after apt upgrades.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pyinfra.api.state import BaseStateCallback

from roles.verification.summary import (
    NOT_VERIFIED,
    UNREACHABLE,
    VERIFIED,
    HostOutcome,
    fleet_counts,
    render_html,
    render_markdown,
    row_for,
)
from verify.api import Report

# pyinfra's CLI only prints records of the "pyinfra" logger tree.
log = logging.getLogger("pyinfra.rocm_fleet.verification")

SUMMARY_MARKDOWN = "summary.md"
SUMMARY_HTML = "summary.html"


class FleetSummary(BaseStateCallback):
    def __init__(self, reports_dir: Path, title: str = "rocm-fleet verification"):
        self.reports_dir = reports_dir
        self.title = title
        self.reports: dict[str, Report] = {}
        self.no_report: dict[str, str] = {}  # host → why verification gave no report
        self.labels: dict[str, str | None] = {}
        self.drift: dict[str, tuple[str, ...]] = {}
        self.failed_at: dict[str, str] = {}
        self.disconnected: set[str] = set()
        self.written: tuple[Path, Path] | None = None

    # --- what the verification deploy tells us ----------------------------------------------------------------
    def record_report(self, host_name: str, report: Report, torch_label: str | None,
                      drift: tuple[str, ...] = ()) -> None:
        self.drift[host_name] = tuple(drift)
        self.reports[host_name] = report
        self.labels[host_name] = torch_label

    def record_no_report(self, host_name: str, why: str, torch_label: str | None) -> None:
        self.no_report[host_name] = why
        self.labels[host_name] = torch_label

    def note_label(self, host_name: str, torch_label: str | None) -> None:
        self.labels.setdefault(host_name, torch_label)

    # --- pyinfra callbacks ----------------------------------------------------------------------------------------
    def operation_host_error(self, state, host, op_hash, retry_count: int = 0, max_retries: int = 0):
        if host.name not in self.failed_at:
            names = state.get_op_meta(op_hash).names
            self.failed_at[host.name] = f"failed at '{', '.join(sorted(names)) or 'an operation'}'"

    def host_disconnect(self, state, host):
        self.disconnected.add(host.name)
        if not state.is_executing:
            return  # --dry, --debug-operations …: nothing ran, nothing to summarise
        if {h.name for h in state.activated_hosts} <= self.disconnected:
            self.write(state)

    # --- the summary ----------------------------------------------------------------------------------------------
    def outcomes(self, state) -> list[HostOutcome]:
        activated = {h.name for h in state.activated_hosts}
        outcomes = []
        for host in state.inventory:
            if not state.is_host_in_limit(host):
                continue
            name = host.name
            label = self.labels.get(name)
            if name in self.reports:
                outcomes.append(HostOutcome(name, VERIFIED, self.reports[name], torch_label=label,
                                            drift=self.drift.get(name, ())))
            elif name not in activated:
                outcomes.append(HostOutcome(name, UNREACHABLE, detail="could not connect", torch_label=label))
            else:
                why = self.no_report.get(name) or self.failed_at.get(name) or "verification did not run on this host"
                outcomes.append(HostOutcome(name, NOT_VERIFIED, detail=why, torch_label=label))
        return outcomes

    def write(self, state) -> tuple[Path, Path]:
        outcomes = self.outcomes(state)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        markdown = self.reports_dir / SUMMARY_MARKDOWN
        page = self.reports_dir / SUMMARY_HTML
        markdown.write_text(render_markdown(outcomes, title=self.title, generated_at=stamp), encoding="utf-8")
        page.write_text(render_html(outcomes, title=self.title, generated_at=stamp), encoding="utf-8")
        counts = fleet_counts(row_for(o) for o in outcomes)
        log.info(
            "fleet summary: %s — %s and %s",
            ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items())) or "no hosts",
            markdown, page,
        )
        self.written = (markdown, page)
        return self.written


def fleet_summary(state, reports_dir: Path) -> FleetSummary:
    """The run's summary writer, registered on first use (every host's deploy asks; one handler per run)."""
    for handler in state.callback_handlers:
        if isinstance(handler, FleetSummary):
            return handler
    handler = FleetSummary(reports_dir)
    state.add_callback_handler(handler)
    return handler
