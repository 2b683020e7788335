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
from typing import Any

from verify.report.hook_state import StateDirectory, keep_file, read_result, unwrap
from verify.report.kept_files import BOOT_CHECK_DIR, STATE_ROOT
from verify.report.report import BootCheckFacts, Report

KIND = "rocm-fleet.boot-check-result"
VERSION = 1
DEFAULT_DIR = f"{STATE_ROOT}/{BOOT_CHECK_DIR}"  # /var/lib/rocm-fleet/boot-check: also where the status task reads
READ_LIMIT = 32 * 1024 * 1024  # a full report with the strays' evidence is well under 1 MB


@dataclass(frozen=True)
class BootResult:
    boot_id: str
    kernel: str
    checked_at: str
    report: Report
    previous_kernel: str | None = None

    def facts(self) -> BootCheckFacts:
        return BootCheckFacts(
            self.boot_id, self.kernel, self.checked_at, self.report.verdict, self.report.reason, self.previous_kernel
        )

    def to_json(self) -> dict:
        return {
            "kind": KIND,
            "version": VERSION,
            "boot_id": self.boot_id,
            "kernel": self.kernel,
            "previous_kernel": self.previous_kernel,
            "checked_at": self.checked_at,
            "report": self.report.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> BootResult:
        report = unwrap(data, where, KIND, VERSION, "a boot-check result")
        previous = data.get("previous_kernel")
        return cls(
            str(data.get("boot_id")),
            str(data.get("kernel")),
            str(data.get("checked_at")),
            report,
            previous if isinstance(previous, str) else None,
        )


class BootState(StateDirectory):
    default = DEFAULT_DIR

    def last(self) -> BootResult | None:
        return read_result(self.last_path, READ_LIMIT, BootResult.from_json)

    def record(self, result: BootResult) -> None:
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        keep_file(self.last_path, json.dumps(result.to_json(), indent=1) + "\n")
