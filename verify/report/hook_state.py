"""What the apt hook keeps between dpkg runs: its last result and its last passing one (/var/lib/rocm-fleet/apt-hook/).

A result is the static report of one hook run and the drift from the result before it:

    {"kind": "rocm-fleet.apt-hook-result", "version": 1, "checked_at": "…", "report": {…}, "drift": {…} | null}

`last.json` is replaced by every run, `last-pass.json` by every run whose report proves a pass (report.py
`judge_report`, the rule the controller applies too). Files are read as regular files only, never through a symlink, at
most `MAX_STATE` bytes (verify/safe_read.py), and replaced atomically (kept_files.replace_file: a private,
unpredictable name in the same directory, renamed over the old file), so a reader (or the next run after a hook killed
halfway) never sees half a file. A file that is not a result — corrupt, another program's, a format this version does
not read — raises StateError with one line; the hook reports it and the next result replaces it, so the hook never
gets stuck on its own state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.report.kept_files import APT_HOOK_DIR, LAST, STATE_ROOT, replace_file
from verify.report.report import Report, ReportError
from verify.safe_read import read_text

KIND = "rocm-fleet.apt-hook-result"
VERSION = 1
DEFAULT_DIR = f"{STATE_ROOT}/{APT_HOOK_DIR}"  # /var/lib/rocm-fleet/apt-hook: also where the status task reads
LAST_PASS = "last-pass.json"
MAX_STATE = 64 << 20  # a result is a report of some 100 KiB
# What makes two results comparable: the same question asked of the same system (the request's fields; the rest of
# the hook's question is fixed: static checks only). The status task holds a kept result to these of the inventory's.
SAME_QUESTION = ("venv", "expect_rocm", "expect_bitsandbytes", "root")


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
        return {
            "kind": KIND,
            "version": VERSION,
            "checked_at": self.checked_at,
            "report": self.report.to_json(),
            "drift": self.drift,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> HookResult:
        report = unwrap(data, where, KIND, VERSION, "an apt hook result")
        drift = data.get("drift")
        return cls(str(data.get("checked_at")), report, drift if isinstance(drift, dict) else None)


def unwrap(data: Any, where: str, kind: str, version: int, what: str) -> Report:
    """The report inside a kept result of `kind` (the apt hook's, the boot check's): StateError naming `where` when
    `data` is not one, of another format version, or holds no report this checkout reads."""
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise StateError(f"{where} is not {what}")
    if data.get("version") != version:
        raise StateError(f"{where} has format version {data.get('version')!r}, this verifier reads {version}")
    try:
        report = Report.from_json(data.get("report"))
    except ReportError as error:
        raise StateError(f"{where} holds no report ({error})") from None
    if not isinstance(data.get("checked_at"), str):
        raise StateError(f"{where} has no time it was checked at (checked_at is not a string)")
    return report


def read_result(path: Path, limit: int, from_json: Callable[[Any, str], Any]) -> Any | None:
    """The result kept at `path`, through `from_json(data, where)`: None when there is none; StateError when it
    cannot be used. A regular file only, never through a symlink (our own state), at most `limit` bytes."""
    try:
        text = read_text(path, limit, follow=False)
    except (FileNotFoundError, NotADirectoryError):  # nothing recorded (an unusable directory: record() says so)
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise StateError(f"{path} cannot be read ({error})") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise StateError(f"{path} is not JSON ({error})") from None
    return from_json(data, str(path))


def keep_file(path: Path, text: str) -> None:
    """Replace `path` in one step (kept_files.replace_file: a private, unpredictable name, no symlink followed)."""
    replace_file(str(path.parent), path.name, text)


class StateDirectory:
    """A directory of kept results (the apt hook's; the boot check's, boot_state.BootState): its `last.json`."""

    default = DEFAULT_DIR

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(self.default if directory is None else directory)

    @property
    def last_path(self) -> Path:
        return self.directory / LAST


class HookState(StateDirectory):
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
        keep_file(self.last_path, text)
        if result.passed:
            keep_file(self.last_pass_path, text)

    @staticmethod
    def _read(path: Path) -> HookResult | None:
        return read_result(path, MAX_STATE, HookResult.from_json)
