"""The apt hook's fact: what of the hook is on the host (its configuration, its verifier copy, its state)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.apt_hook.model import CONF_PATH, STATE_FILE, copy_state_command

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class HookFiles:
    python: str | None  # the host's python3 (`command -v python3`), None when there is none
    # The sha256 of the verify.pyz the hook's copy was made from, when the copy's files are exactly what its manifest
    # lists (checked on the host, file by file); None: no usable copy.
    verifier_sha256: str | None
    has_state: bool  # the hook has recorded a result (last.json)
    config: str | None  # the text of the apt configuration file, None when it is absent
    copy_damaged: bool = False  # a copy is there, but its files differ from its manifest

    @property
    def anything(self) -> bool:
        return self.config is not None or self.verifier_sha256 is not None or self.copy_damaged or self.has_state


class AptHookFiles(FactBase):
    """What of the apt hook is installed. Output: `python PATH`, `verifier SHA|damaged|` (the copy's state, from its
    real content: roles/apt_hook/model.py's copy_state_command), `state yes|no`, then `config` and the configuration
    file's lines when it exists."""

    def command(self) -> str:
        return (
            'printf "python %s\\n" "$(command -v python3 || true)"; '
            f"{copy_state_command()}; "
            f'if [ -f {STATE_FILE} ]; then echo "state yes"; else echo "state no"; fi; '
            f'if [ -f {CONF_PATH} ]; then echo "config"; cat {CONF_PATH}; fi'
        )

    def default(self) -> HookFiles:  # no output at all: nothing to be found, not even python3
        return HookFiles(python=None, verifier_sha256=None, has_state=False, config=None)

    def process(self, output) -> HookFiles:
        lines = list(output)
        head = [line.split(" ", 1) + [""] for line in lines[:3]]  # "verifier " may arrive without its space
        if [fields[0] for fields in head] != ["python", "verifier", "state"] or head[2][1] not in ("yes", "no"):
            raise FactProcessError(f"apt hook files: unexpected output {lines[:3]!r}")
        config = None
        if len(lines) > 3:
            if lines[3] != "config":
                raise FactProcessError(f"apt hook files: unexpected output {lines[3]!r}")
            config = "\n".join(lines[4:])
        copy = head[1][1].strip()
        if copy not in ("", "damaged") and not _SHA256.fullmatch(copy):
            raise FactProcessError(f"apt hook files: unexpected output {lines[1]!r}")
        return HookFiles(
            python=head[0][1].strip() or None,
            verifier_sha256=copy if _SHA256.fullmatch(copy) else None,
            has_state=head[2][1] == "yes",
            config=config,
            copy_damaged=copy == "damaged",
        )
