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
Each verification run adds every host's verdict to reports/history.json (`VerdictHistory`: the page's strip).

The status task (roles/status) uses the same writer, `FleetSummary.for_status`: its outcomes are whole (what each
host keeps, read at plan time), it writes reports/status.md and status.html, also for `--dry` (reading is all it
does), and it leaves the history alone (it re-reads results, it is not a new run).
A small wrapper script around `pyinfra` would also work, but would not run for the plain
`pyinfra INVENTORY tasks/verify.py` that re-verifies a fleet after apt upgrades.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pyinfra import state as pyinfra_state
from pyinfra.api.state import BaseStateCallback

from roles.settings import HostSettings
from roles.verification.host_row import NOT_VERIFIED, UNREACHABLE, VERIFIED, HostOutcome, Row, row_for
from roles.verification.summary import fleet_counts, html_of, markdown_of
from verify.report.host_input import inert
from verify.report.kept_files import replace_file
from verify.report.report import Report

# pyinfra's CLI only prints records of the "pyinfra" logger tree.
log = logging.getLogger("pyinfra.rocm_fleet.verification")

SUMMARY_MARKDOWN = "summary.md"
SUMMARY_HTML = "summary.html"
STATUS_MARKDOWN = "status.md"
STATUS_HTML = "status.html"


class FleetSummary(BaseStateCallback):
    def __init__(
        self,
        reports_dir: Path,
        title: str = "rocm-fleet verification",
        files: tuple[str, str] = (SUMMARY_MARKDOWN, SUMMARY_HTML),
        *,
        status: bool = False,
    ):
        self.reports_dir = reports_dir
        self.title = title
        self.files = files
        self.status = status  # the status task's summary: see the module's docstring
        self.run_id = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + f"/{id(self):x}"
        self.recorded: dict[str, HostOutcome] = {}  # host → its outcome, once the host said something
        self.labels: dict[str, str | None] = {}
        self.failed_at: dict[str, str] = {}
        self.disconnected: set[str] = set()
        self._rows: dict[str, tuple[HostOutcome, Row]] = {}  # host → (outcome, its row): see row_of
        self.written: tuple[Path, Path] | None = None

    @classmethod
    def for_status(cls, reports_dir: Path) -> FleetSummary:
        return cls(reports_dir, "rocm-fleet status", (STATUS_MARKDOWN, STATUS_HTML), status=True)

    # --- what the deploys tell us ------------------------------------------------------------------------------
    def record_report(
        self, host_name: str, report: Report, torch_label: str | None, drift: tuple[str, ...] = ()
    ) -> None:
        self.labels[host_name] = torch_label
        self.recorded[host_name] = HostOutcome(host_name, VERIFIED, report, torch_label=torch_label, drift=tuple(drift))

    def record_no_report(self, host_name: str, why: str, torch_label: str | None) -> None:
        self.labels[host_name] = torch_label
        self.recorded[host_name] = HostOutcome(host_name, NOT_VERIFIED, detail=why, torch_label=torch_label)

    def record(self, outcome: HostOutcome) -> None:
        """A host's whole outcome (the status task)."""
        self.labels[outcome.host] = outcome.torch_label
        self.recorded[outcome.host] = outcome

    def note_label(self, host_name: str, torch_label: str | None) -> None:
        self.labels.setdefault(host_name, torch_label)

    def row_of(self, outcome: HostOutcome) -> Row:
        """The outcome's row (host_row.row_for), made once: judging a report runs its schema check, and the row is
        read by the host's status line, the history, both files and the log line."""
        made = self._rows.get(outcome.host)
        if made is None or made[0] is not outcome:
            made = self._rows[outcome.host] = (outcome, _row_or_finding(outcome))
        return made[1]

    # --- pyinfra callbacks ----------------------------------------------------------------------------------------
    def operation_host_error(self, state, host, op_hash, retry_count: int = 0, max_retries: int = 0):
        if host.name not in self.failed_at:
            names = state.get_op_meta(op_hash).names
            self.failed_at[host.name] = f"failed at '{', '.join(sorted(names)) or 'an operation'}'"

    def host_disconnect(self, state, host):
        self.disconnected.add(host.name)
        if not state.is_executing and not self.status:
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
            if name in self.recorded:
                outcomes.append(self.recorded[name])
            elif name not in activated:
                outcomes.append(HostOutcome(name, UNREACHABLE, detail="could not connect", torch_label=label))
            else:
                why = self.failed_at.get(name) or (
                    "nothing was read from this host" if self.status else "verification did not run on this host"
                )
                outcomes.append(HostOutcome(name, NOT_VERIFIED, detail=why, torch_label=label))
        return outcomes

    def write(self, state) -> tuple[Path, Path]:
        rows = [self.row_of(o) for o in self.outcomes(state)]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        history = VerdictHistory(self.reports_dir)
        if not self.status:
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            history.record(self.run_id, {row.host: (row.verdict, at) for row in rows})
        rows = [replace(row, history=history.of(row.host)) for row in rows]
        markdown = self.reports_dir / self.files[0]
        page = self.reports_dir / self.files[1]
        write_file(markdown, markdown_of(rows, title=self.title, generated_at=stamp))
        write_file(page, html_of(rows, title=self.title, generated_at=stamp))
        counts = fleet_counts(rows)
        log.info(
            "%s: %s — %s and %s",
            "fleet status" if self.status else "fleet summary",
            ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items())) or "no hosts",
            markdown,
            page,
        )
        self.written = (markdown, page)
        return self.written


def _row_or_finding(outcome: HostOutcome) -> Row:
    """The outcome's row; one that cannot be made (a report the row's code trips on) is that host's NOT VERIFIED row,
    never the whole summary lost."""
    try:
        return row_for(outcome)
    except Exception as error:  # noqa: BLE001
        why = f"{type(error).__name__}: {inert(str(error))[:200]}"
        return row_for(
            HostOutcome(
                outcome.host,
                NOT_VERIFIED,
                detail=f"its results could not be shown ({why})",
                torch_label=outcome.torch_label,
            )
        )


def reports_dir_for(settings: HostSettings) -> Path:
    """The controller's directory for reports/<host>.json and the fleet summary (`reports_dir`; a relative one is
    where pyinfra runs)."""
    path = Path(settings.reports_dir)
    return path if path.is_absolute() else Path(pyinfra_state.cwd or ".") / path


def write_file(path: Path, text: str) -> None:
    """Write a controller file whole (a reader sees the old one or the new one) under a private, unpredictable name:
    the verifier's own replace_file, in the directory a configured reports_dir link points at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(str(path.parent.resolve()), path.name, text)


def fleet_summary(state, reports_dir: Path, *, status: bool = False) -> FleetSummary:
    """The run's summary writer, registered on first use (every host's deploy asks; one handler per run)."""
    for handler in state.callback_handlers:
        if isinstance(handler, FleetSummary) and handler.status == status:
            return handler
    handler = FleetSummary.for_status(reports_dir) if status else FleetSummary(reports_dir)
    state.add_callback_handler(handler)
    return handler


# --- the verdict history ----------------------------------------------------------------------------------------------

HISTORY_FILE = "history.json"
HISTORY_KIND = "rocm-fleet.verdict-history"
HISTORY_VERSION = 1
HISTORY_KEEP = 20  # entries kept per host; the page shows them all (a strip of 20 marks is about 13 characters wide)


def _history_entries(value: object) -> list[dict]:
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("verdict", "at"))]


class VerdictHistory:
    """The last verdicts of every host, for the summary page's history strip: reports/history.json on the controller.

        {"kind": "rocm-fleet.verdict-history", "version": 1,
         "hosts": {"ws1": [{"verdict": "FAIL", "at": "2026-12-01T17:00:00Z", "run": "…"}, …]}}

    One small file for the fleet, not a file per report: the summary writer, which runs once per verification run
    anyway, reads it, adds one entry per host in the run (its verdict, UNREACHABLE and NOT VERIFIED included) and writes
    it back atomically, keeping the last HISTORY_KEEP entries of each host — no old report is ever re-read. An entry
    is keyed by its run, so writing the summary twice in one run (pyinfra may disconnect every host twice) records the
    run once. A file that cannot be read is started afresh (it is a convenience, never evidence), with a warning.
    """

    def __init__(self, reports_dir: Path):
        self.path = Path(reports_dir) / HISTORY_FILE
        self.hosts = self._read()

    def _read(self) -> dict[str, list[dict]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning("%s cannot be read (%s): the verdict history starts again", self.path, error)
            return {}
        if not isinstance(data, dict) or data.get("kind") != HISTORY_KIND or data.get("version") != HISTORY_VERSION:
            log.warning("%s is not a verdict history this checkout reads: it starts again", self.path)
            return {}
        hosts = data.get("hosts")
        return {str(h): _history_entries(e) for h, e in hosts.items()} if isinstance(hosts, dict) else {}

    def of(self, host: str) -> tuple[tuple[str, str], ...]:
        """(verdict, when) of the host's last runs, oldest first."""
        return tuple((e["verdict"], e["at"]) for e in self.hosts.get(host, ()))

    def record(self, run: str, verdicts: Mapping[str, tuple[str, str]]) -> None:
        """Add this run's (verdict, when) per host — replacing what this same run recorded before — and write."""
        for host, (verdict, at) in verdicts.items():
            kept = [e for e in self.hosts.get(host, []) if e.get("run") != run]
            self.hosts[host] = (kept + [{"verdict": verdict, "at": at, "run": run}])[-HISTORY_KEEP:]
        text = json.dumps({"kind": HISTORY_KIND, "version": HISTORY_VERSION, "hosts": self.hosts}, indent=0) + "\n"
        write_file(self.path, text)
