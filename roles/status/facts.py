"""The status task's one fact: every result the host keeps under /var/lib/rocm-fleet, read as hostile input by the
host's installed verifier (`verify kept`, verify/commands/kept.py), run as root with `python3 -I -S` through its
launcher like every other root run of it (roles/verifier.py) — the host's current version, whichever checkout
installed it. It prints one JSON document: each kept file's text (regular files only, symlinks not followed, bounded
reads) or why there is none, the host's name and its clock. Parsing and judging happen on the controller
(roles/status/model.py, through `Report.from_json` and `judge_report`).

A host with no verifier (never provisioned) answers {"error": …, "provisioned": False}; one without python3, or
anything else that keeps the verifier from answering, {"error": its last line}: the status row then says so. The
command never exits non-zero, so it never fails the host in pyinfra.
"""

from __future__ import annotations

from pyinfra.api import FactBase

from roles.verifier import LAUNCHER, not_installed_line, verifier_command
from verify.report import host_input

MAX_ERROR = 300


class KeptResults(FactBase):
    """{"now": …, "files": {source: {...}}} as kept_files.read_kept_files() gives it, or {"error": "…"}."""

    def command(self) -> str:
        return f"{{ {verifier_command('kept', pinned=False)}; }} 2>&1 || true"

    def default(self) -> dict:
        return {"error": "no answer"}

    def process(self, output) -> dict:
        lines = [line for line in output if line.strip()]
        text = "\n".join(lines)
        try:
            # Strict JSON; its strings are made inert where they are used (verify/report/kept.py).
            answer = host_input.loads(text, inert_strings=False)
        except ValueError as error:
            if text.lstrip().startswith(("{", "[")):
                return {"error": f"its answer is not one JSON document ({error})"[:MAX_ERROR]}
            answer = None
        if isinstance(answer, dict):
            return answer
        last = host_input.inert(lines[-1].strip()) if lines else "no output"
        if last == not_installed_line():
            return {
                "error": f"never provisioned: no rocm-fleet verifier on the host ({LAUNCHER})",
                "provisioned": False,
            }
        return {"error": last[:MAX_ERROR]}
