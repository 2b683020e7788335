"""The boot check's fact: the host's python3, the unit file as it is, and whether the unit is enabled (linked)."""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra.api import FactBase

from roles.boot_check.model import STATE_DIR, UNIT_PATH, WANTS_LINK


@dataclass(frozen=True)
class BootUnitFiles:
    python: str | None  # `command -v python3`
    unit: str | None  # the unit file's text, None when absent
    enabled: bool  # the multi-user.target.wants link exists
    has_state: bool  # a result is recorded

    @property
    def anything(self) -> bool:
        return self.unit is not None or self.enabled or self.has_state


class BootUnit(FactBase):
    """Output: `python PATH`, `enabled yes|no`, `state yes|no`, then `unit` and the unit file's lines when it exists."""

    def command(self) -> str:
        return (
            'printf "python %s\\n" "$(command -v python3 || true)"; '
            f'if [ -L {WANTS_LINK} ]; then echo "enabled yes"; else echo "enabled no"; fi; '
            f'if [ -f {STATE_DIR}/last.json ]; then echo "state yes"; else echo "state no"; fi; '
            f'if [ -f {UNIT_PATH} ]; then echo "unit"; cat {UNIT_PATH}; fi'
        )

    def process(self, output) -> BootUnitFiles:
        lines = list(output)
        head = dict(line.split(" ", 1) if " " in line else (line, "") for line in lines[:3])
        unit = "\n".join(lines[4:]) + "\n" if len(lines) > 3 and lines[3] == "unit" else None
        return BootUnitFiles(
            python=head.get("python", "").strip() or None,
            unit=unit,
            enabled=head.get("enabled") == "yes",
            has_state=head.get("state") == "yes",
        )

    @staticmethod
    def default() -> BootUnitFiles:
        return BootUnitFiles(None, None, False, False)
