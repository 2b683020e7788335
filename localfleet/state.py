"""The fleet's state file (fleets/<name>/state.json): what `status`, `attach` and the e2e helpers read.

Teardown does not depend on it — it finds processes and mounts from the fleet directory itself — so a state file
that is missing, half-written by a killed controller, or stale never prevents a clean `down`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from .procs import ProcessId

STATE_VERSION = 1


@dataclass(frozen=True)
class HostState:
    name: str
    port: int
    root: str
    host_public_key: str
    sshd: ProcessId | None = None  # a chroot host's sshd, started by localfleet (None: stopped, or a booted host)
    container: ProcessId | None = None  # a booted host's launcher (localfleet/container.py)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "port": self.port,
            "root": self.root,
            "host_public_key": self.host_public_key,
            "sshd": self.sshd.to_json() if self.sshd else None,
            "container": self.container.to_json() if self.container else None,
        }

    @classmethod
    def from_json(cls, data: dict) -> HostState:
        return cls(
            data["name"],
            int(data["port"]),
            data["root"],
            data["host_public_key"],
            ProcessId.from_json(data.get("sshd")),
            ProcessId.from_json(data.get("container")),
        )


@dataclass(frozen=True)
class FleetState:
    name: str
    directory: str
    base: str
    login: str
    owner: ProcessId | None  # None: a fleet from `python -m localfleet up`, kept until `down`
    hosts: tuple[HostState, ...] = ()
    created: float = field(default_factory=time.time)
    boot: bool = False  # booted hosts (systemd as PID 1 under systemd-nspawn), else chroots

    def with_host(self, host: HostState) -> FleetState:
        others = tuple(h for h in self.hosts if h.name != host.name)
        return replace(self, hosts=tuple(sorted(others + (host,), key=lambda h: int(h.name.removeprefix("ws")))))

    def to_json(self) -> dict:
        return {
            "version": STATE_VERSION,
            "name": self.name,
            "directory": self.directory,
            "base": self.base,
            "login": self.login,
            "owner": self.owner.to_json() if self.owner else None,
            "created": self.created,
            "boot": self.boot,
            "hosts": [h.to_json() for h in self.hosts],
        }

    @classmethod
    def from_json(cls, data: dict) -> FleetState:
        return cls(
            data["name"],
            data["directory"],
            data["base"],
            data["login"],
            ProcessId.from_json(data.get("owner")),
            tuple(HostState.from_json(h) for h in data.get("hosts", ())),
            data.get("created", 0.0),
            bool(data.get("boot", False)),
        )


def state_path(fleet_dir: Path) -> Path:
    return fleet_dir / "state.json"


def save_state(fleet_dir: Path, state: FleetState) -> None:
    path = state_path(fleet_dir)
    partial = path.with_name(f".state.json.{os.getpid()}")
    partial.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(partial, path)  # atomic: a reader sees the old or the new file, never half of one


def load_state(fleet_dir: Path) -> FleetState | None:
    """The saved state, or None when there is none or it cannot be read (teardown works without it)."""
    try:
        return FleetState.from_json(json.loads(state_path(fleet_dir).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
