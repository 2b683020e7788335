"""The apt hook's fact: what of the hook is on the host (its script, dpkg's and apt's lines, its state)."""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.apt_hook.model import CONF_PATH, DPKG_CONF_PATH, SCRIPT_PATH, STATE_FILE

# The hook's files, by the name each section of the fact's output carries.
FILES = {"script": SCRIPT_PATH, "dpkg": DPKG_CONF_PATH, "apt": CONF_PATH}
SECTION = "--- rocm-fleet file "  # a section's first line: SECTION + its name; then the file's lines


@dataclass(frozen=True)
class HookFiles:
    python: str | None  # the host's python3 (`command -v python3`), None when there is none
    has_state: bool  # the hook has recorded a result (last.json)
    config: str | None  # the text of apt's configuration file, None when it is absent
    dpkg_config: str | None = None  # the text of dpkg's configuration file
    script: str | None = None  # the text of the script both run

    @property
    def anything(self) -> bool:
        return any(text is not None for text in (self.config, self.dpkg_config, self.script)) or self.has_state

    def text_of(self, path: str) -> str | None:
        return {CONF_PATH: self.config, DPKG_CONF_PATH: self.dpkg_config, SCRIPT_PATH: self.script}[path]


class AptHookFiles(FactBase):
    """What of the apt hook is installed. Output: `python PATH`, `state yes|no`, then for each of its files that
    exists a line `--- rocm-fleet file NAME` (script, dpkg, apt) and the file's lines."""

    def command(self) -> str:
        files = "; ".join(
            f'if [ -f {path} ]; then echo "{SECTION}{name}"; awk 1 {path}; fi' for name, path in FILES.items()
        )
        return (
            'printf "python %s\\n" "$(command -v python3 || true)"; '
            f'if [ -f {STATE_FILE} ]; then echo "state yes"; else echo "state no"; fi; {files}'
        )

    def default(self) -> HookFiles:  # no output at all: nothing to be found, not even python3
        return HookFiles(python=None, has_state=False, config=None)

    def process(self, output) -> HookFiles:
        lines = list(output)
        head = [line.split(" ", 1) + [""] for line in lines[:2]]  # "python " may arrive without its space
        if [fields[0] for fields in head] != ["python", "state"] or head[1][1] not in ("yes", "no"):
            raise FactProcessError(f"apt hook files: unexpected output {lines[:2]!r}")
        sections: dict[str, list[str]] = {}
        current = None
        for line in lines[2:]:
            if line.startswith(SECTION) and line[len(SECTION) :] in FILES:
                current = sections.setdefault(line[len(SECTION) :], [])
            elif current is None:
                raise FactProcessError(f"apt hook files: unexpected output {line!r}")
            else:
                current.append(line)
        text = {name: "\n".join(found) for name, found in sections.items()}
        return HookFiles(
            python=head[0][1].strip() or None,
            has_state=head[1][1] == "yes",
            config=text.get("apt"),
            dpkg_config=text.get("dpkg"),
            script=text.get("script"),
        )
