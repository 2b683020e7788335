"""The status task's one fact: every result the host keeps under /var/lib/rocm-fleet, read as hostile input.

The command sends verify/report/kept_files.py and the verifier's safe reader (verify/safe_read.py) themselves as the
program (`python3 -I -S -c …`, the sources zlib- and base64-packed into one shell word, loaded as modules of those
names): the host's own python3 in isolated mode (no environment variables, no user site, no site-packages: nothing a
non-root account can write is imported), nothing uploaded, nothing of the venv touched, whatever verifier version the
host has. It prints one JSON document: each kept file's text (regular files only, symlinks not followed, bounded
reads) or why there is none, the host's name and its clock. Parsing and judging happen on the controller
(roles/status/model.py, through `Report.from_json` and `judge_report`).

A host without python3, or anything else that keeps the program from answering, gives {"error": its last line}: the
status row then says so. The command never exits non-zero, so it never fails the host in pyinfra.
"""

from __future__ import annotations

import base64
import shlex
import zlib

from pyinfra.api import FactBase

from verify.api import KEPT_READER_SOURCES, host_input

_PACKED = tuple(
    (name, base64.b64encode(zlib.compress(source.encode("utf-8"), 9)).decode("ascii"))
    for name, source in KEPT_READER_SOURCES
)
# Each source becomes the module of its name (kept_files' `from verify.safe_read import …` finds it in sys.modules).
PROGRAM = (
    "import binascii,sys,types,zlib\n"
    f"for n,p in {_PACKED!r}:\n"
    " m=types.ModuleType(n);sys.modules[n]=m;exec(compile(zlib.decompress(binascii.a2b_base64(p)),n,'exec'),"
    "m.__dict__)\n"
    "sys.exit(m.main([]))"
)
MAX_ERROR = 300


class KeptResults(FactBase):
    """{"now": …, "files": {source: {...}}} as kept_files.read_kept_files() gives it, or {"error": "…"}."""

    def command(self) -> str:
        return f"python3 -I -S -c {shlex.quote(PROGRAM)} 2>&1 || true"

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
        return {"error": last[:MAX_ERROR]}
