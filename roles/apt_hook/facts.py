"""The apt hook's fact: what of the hook is on the host (its configuration, its state)."""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.apt_hook.model import CONF_PATH, STATE_FILE


@dataclass(frozen=True)
class HookFiles:
    python: str | None  # the host's python3 (`command -v python3`), None when there is none
    has_state: bool  # the hook has recorded a result (last.json)
    config: str | None  # the text of the apt configuration file, None when it is absent

    @property
    def anything(self) -> bool:
        return self.config is not None or self.has_state


class AptHookFiles(FactBase):
    """What of the apt hook is installed. Output: `python PATH`, `state yes|no`, then `config` and the configuration
    file's lines when it exists."""

    def command(self) -> str:
        return (
            'printf "python %s\\n" "$(command -v python3 || true)"; '
            f'if [ -f {STATE_FILE} ]; then echo "state yes"; else echo "state no"; fi; '
            f'if [ -f {CONF_PATH} ]; then echo "config"; cat {CONF_PATH}; fi'
        )

    def default(self) -> HookFiles:  # no output at all: nothing to be found, not even python3
        return HookFiles(python=None, has_state=False, config=None)

    def process(self, output) -> HookFiles:
        lines = list(output)
        head = [line.split(" ", 1) + [""] for line in lines[:2]]  # "python " may arrive without its space
        if [fields[0] for fields in head] != ["python", "state"] or head[1][1] not in ("yes", "no"):
            raise FactProcessError(f"apt hook files: unexpected output {lines[:2]!r}")
        config = None
        if len(lines) > 2:
            if lines[2] != "config":
                raise FactProcessError(f"apt hook files: unexpected output {lines[2]!r}")
            config = "\n".join(lines[3:])
        return HookFiles(python=head[0][1].strip() or None, has_state=head[1][1] == "yes", config=config)
