"""What the boot-time check keeps on the host (/var/lib/rocm-fleet/boot-check/, beside the apt hook's state): the
full report of its last run and the boot it ran in.

    {"kind": "rocm-fleet.boot-check-result", "version": 1, "boot_id": "…", "kernel": "6.8.0-51-generic",
     "previous_kernel": "6.8.0-49-generic" | null, "checked_at": "…", "report": {…}}

`last.json` is replaced by every run (atomically, as the apt hook's files are). `verify check` reads it back into its
report (`facts.boot_check`), so the controller's drift can say what the reboot did: "after the reboot into
6.8.0-51-generic the GPU is gone: …". A file that is not a result raises StateError with one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.report.hook_state import StateError, _replace
from verify.report.report import BootCheckFacts, Report, ReportError
from verify.safe_read import read_text

KIND = "rocm-fleet.boot-check-result"
VERSION = 1
DEFAULT_DIR = "/var/lib/rocm-fleet/boot-check"
LAST = "last.json"
READ_LIMIT = 32 * 1024 * 1024  # a full report with the strays' evidence is well under 1 MB


@dataclass(frozen=True)
class BootResult:
    boot_id: str
    kernel: str
    checked_at: str
    report: Report
    previous_kernel: str | None = None

    def facts(self) -> BootCheckFacts:
        return BootCheckFacts(self.boot_id, self.kernel, self.checked_at, self.report.verdict, self.report.reason,
                              self.previous_kernel)

    def to_json(self) -> dict:
        return {"kind": KIND, "version": VERSION, "boot_id": self.boot_id, "kernel": self.kernel,
                "previous_kernel": self.previous_kernel, "checked_at": self.checked_at,
                "report": self.report.to_json()}

    @classmethod
    def from_json(cls, data: Any, where: str) -> BootResult:
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise StateError(f"{where} is not a boot-check result")
        if data.get("version") != VERSION:
            raise StateError(f"{where} has format version {data.get('version')!r}, this verifier reads {VERSION}")
        try:
            report = Report.from_json(data.get("report"))
        except ReportError as error:
            raise StateError(f"{where} holds no report ({error})") from None
        previous = data.get("previous_kernel")
        return cls(str(data.get("boot_id")), str(data.get("kernel")), str(data.get("checked_at")), report,
                   previous if isinstance(previous, str) else None)


class BootState:
    def __init__(self, directory: str | Path = DEFAULT_DIR):
        self.directory = Path(directory)

    @property
    def last_path(self) -> Path:
        return self.directory / LAST

    def last(self) -> BootResult | None:
        try:
            text = read_text(self.last_path, READ_LIMIT, follow=False)  # our own state: never through a link
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise StateError(f"{self.last_path} cannot be read ({error})") from None
        try:
            data = json.loads(text)
        except ValueError as error:
            raise StateError(f"{self.last_path} is not JSON ({error})") from None
        return BootResult.from_json(data, str(self.last_path))

    def record(self, result: BootResult) -> None:
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        _replace(self.last_path, json.dumps(result.to_json(), indent=1) + "\n")
