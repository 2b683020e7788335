"""What the apt hook keeps between dpkg runs: its last result and its last passing one (/var/lib/rocm-fleet/apt-hook/).

A result is the static report of one hook run and the drift from the result before it:

    {"kind": "rocm-fleet.apt-hook-result", "version": 1, "checked_at": "…", "report": {…}, "drift": {…} | null}

`last.json` is replaced by every run, `last-pass.json` by every run whose report proves a pass (report.py
`judge_report`, the rule the controller applies too). Files are read as regular files only, never through a symlink, at
most `MAX_STATE` bytes (verify/safe_read.py), and replaced atomically, so a reader (or the next run after a hook killed
halfway) never sees half a file. A file that is not a result — corrupt, another program's, a format this version does
not read — raises StateError with one line; the hook reports it and the next result replaces it, so the hook never gets
stuck on its own state.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from verify.report.report import Report, ReportError
from verify.safe_read import read_text

KIND = "rocm-fleet.apt-hook-result"
VERSION = 1
DEFAULT_DIR = "/var/lib/rocm-fleet/apt-hook"
LAST = "last.json"
LAST_PASS = "last-pass.json"
MAX_STATE = 64 << 20  # a result is a report of some 100 KiB


class StateError(Exception):
    """A state file that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class HookResult:
    checked_at: str
    report: Report
    drift: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.report.passed

    def to_json(self) -> dict:
        return {"kind": KIND, "version": VERSION, "checked_at": self.checked_at, "report": self.report.to_json(),
                "drift": self.drift}

    @classmethod
    def from_json(cls, data: Any, where: str) -> HookResult:
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise StateError(f"{where} is not an apt hook result")
        if data.get("version") != VERSION:
            raise StateError(f"{where} has format version {data.get('version')!r}, this verifier reads {VERSION}")
        try:
            report = Report.from_json(data.get("report"))
        except ReportError as error:
            raise StateError(f"{where} holds no report ({error})") from None
        drift = data.get("drift")
        return cls(str(data.get("checked_at")), report, drift if isinstance(drift, dict) else None)


class HookState:
    def __init__(self, directory: str | Path = DEFAULT_DIR):
        self.directory = Path(directory)

    @property
    def last_path(self) -> Path:
        return self.directory / LAST

    @property
    def last_pass_path(self) -> Path:
        return self.directory / LAST_PASS

    def last(self) -> HookResult | None:
        return self._read(self.last_path)

    def last_pass(self) -> HookResult | None:
        return self._read(self.last_pass_path)

    def record(self, result: HookResult) -> None:
        """Keep `result` as the last one (and as the last passing one when it passed)."""
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        text = json.dumps(result.to_json(), indent=1) + "\n"
        _replace(self.last_path, text)
        if result.passed:
            _replace(self.last_pass_path, text)

    @staticmethod
    def _read(path: Path) -> HookResult | None:
        try:
            text = read_text(path, MAX_STATE, follow=False)
        except (FileNotFoundError, NotADirectoryError):  # nothing recorded (an unusable directory: record() says so)
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise StateError(f"{path} cannot be read ({error})") from None
        try:
            data = json.loads(text)
        except ValueError as error:
            raise StateError(f"{path} is not JSON ({error})") from None
        return HookResult.from_json(data, str(path))


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()
