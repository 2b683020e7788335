"""What one pyinfra run remembers between its stages, and between planning an operation and executing it.

A run is one pyinfra `State`: the CLI makes one, and one pytest process makes many, so the memory is keyed by the
State (weakly: it goes when the State goes) and never kept in a module global of its own. Every stage that needs to
remember something across the hosts' deploy files or the two passes of an operation body has a named field here.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from pyinfra.api.state import BaseStateCallback


@dataclass
class RunMemory:
    # roles.settings.require_valid_inventory: the run's inventory verdict, checked once for every host of the run —
    # "" when the data is usable, else the one line that refuses the run; None while not checked yet.
    inventory_refusal: str | None = None
    # roles.stage.stop: hosts a stage has planned to stop; the later stages of the run plan nothing for them.
    stopped_hosts: set[str] = field(default_factory=set)
    # roles.verifier.install_verifier: hosts whose verifier install is planned (the first stage that needs it plans it)
    # -> whether the run installs or switches a version there.
    verifier_planned: dict[str, bool] = field(default_factory=dict)
    # roles.strays.operations: hosts whose stray packages were printed. The operation body runs at plan time and
    # again at execution; each stray is printed once.
    strays_reported: set[str] = field(default_factory=set)
    # roles.run_reads: facts asked of a host once per run where nothing the run does in between can change them
    # (pyinfra 3 caches none) — (host, fact, its arguments, phase) -> what the host answered.
    fact_reads: dict[tuple, Any] = field(default_factory=dict)
    # roles.run_reads.read_ahead: what each host answered to the questions read ahead in one command —
    # host name -> {(fact, its arguments): answer}; served while the run has changed nothing on that host.
    read_ahead: dict[str, dict[tuple, Any]] = field(default_factory=dict)
    # roles.venv.wheelhouse_pull: the wheelhouse servers of this run — the controller's (pull mode,
    # `wheelhouse_serve`) and a seed host's (relay mode, `wheelhouse_seed`, roles/venv/wheelhouse_relay.py) — started
    # by the first host that installs, stopped when their operation ends or the run's last host disconnects; None until
    # then. Its type is wheelhouse_pull.RunServers, named by its base class: this module imports no stage's module.
    wheelhouse_servers: BaseStateCallback | None = None


_memories: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def memory_of(state) -> RunMemory:
    """The memory of the run `state` belongs to (made on first use)."""
    memory = _memories.get(state)
    if memory is None:
        memory = _memories[state] = RunMemory()
    return memory
