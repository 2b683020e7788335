"""The last verdicts of every host, for the summary page's history strip: reports/history.json on the controller.

    {"kind": "rocm-fleet.verdict-history", "version": 1,
     "hosts": {"ws1": [{"verdict": "FAIL", "at": "2026-12-01T17:00:00Z", "run": "…"}, …]}}

One small file for the fleet, not a file per report: the summary writer, which runs once per verification run anyway,
reads it, adds one entry per host in the run (its verdict, UNREACHABLE and NOT VERIFIED included) and writes it back
atomically, keeping the last KEEP entries of each host — no old report is ever re-read. An entry is keyed by its run,
so writing the summary twice in one run (pyinfra may disconnect every host twice) records the run once. A file that
cannot be read is started afresh (it is a convenience, never evidence), with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("pyinfra.rocm_fleet.verdict_history")  # pyinfra's CLI prints the "pyinfra" logger tree

FILE_NAME = "history.json"
KIND = "rocm-fleet.verdict-history"
VERSION = 1
KEEP = 20  # entries kept per host; the page shows them all (a strip of 20 marks is about 13 characters wide)


def _entries(value: object) -> list[dict]:
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("verdict", "at"))]


class VerdictHistory:
    def __init__(self, reports_dir: Path):
        self.path = Path(reports_dir) / FILE_NAME
        self.hosts = self._read()

    def _read(self) -> dict[str, list[dict]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning("%s cannot be read (%s): the verdict history starts again", self.path, error)
            return {}
        if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
            log.warning("%s is not a verdict history this checkout reads: it starts again", self.path)
            return {}
        hosts = data.get("hosts")
        return {str(h): _entries(e) for h, e in hosts.items()} if isinstance(hosts, dict) else {}

    def of(self, host: str) -> tuple[tuple[str, str], ...]:
        """(verdict, when) of the host's last runs, oldest first."""
        return tuple((e["verdict"], e["at"]) for e in self.hosts.get(host, ()))

    def record(self, run: str, verdicts: Mapping[str, tuple[str, str]]) -> None:
        """Add this run's (verdict, when) per host — replacing what this same run recorded before — and write."""
        for host, (verdict, at) in verdicts.items():
            kept = [e for e in self.hosts.get(host, []) if e.get("run") != run]
            self.hosts[host] = (kept + [{"verdict": verdict, "at": at, "run": run}])[-KEEP:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"kind": KIND, "version": VERSION, "hosts": self.hosts}, indent=0) + "\n"
        fd, partial = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(partial, self.path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
