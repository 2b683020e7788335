"""roles/run_memory.py: one memory per pyinfra run (State), held only as long as the State lives."""

from __future__ import annotations

import gc
from pathlib import Path

from pyinfra.api import Config, Inventory, State

from roles import run_memory
from roles.run_memory import memory_of


def _state() -> State:
    return State(Inventory(([], {})), Config())


def test_each_run_has_its_own_memory_and_keeps_it():
    first, second = _state(), _state()
    memory_of(first).stopped_hosts.add("ws1")
    assert memory_of(first) is memory_of(first)
    assert memory_of(first).stopped_hosts == {"ws1"}
    assert memory_of(second).stopped_hosts == set()
    assert memory_of(second).inventory_refusal is None  # not checked yet in that run


def test_the_memory_goes_with_its_run():
    """One pytest process makes many States: their memories must not pile up."""
    state = _state()
    memory_of(state).verifier_planned["ws1"] = True
    before = len(run_memory._memories)
    del state
    gc.collect()
    assert len(run_memory._memories) == before - 1


def test_no_other_module_keeps_memory_per_run():
    """One mechanism: what a run remembers is a field of RunMemory, not another module's WeakKeyDictionary."""
    roles = Path(run_memory.__file__).parent
    others = [
        str(path.relative_to(roles.parent))
        for path in sorted(roles.rglob("*.py"))
        if path != Path(run_memory.__file__) and "WeakKeyDictionary" in path.read_text()
    ]
    assert others == []


def test_the_wheelhouse_servers_of_a_run_are_in_its_memory_and_listen_to_it_once():
    from roles.venv.wheelhouse_pull import servers_of

    state = State(Inventory((["ws1"], {})), Config())  # a run with a host: pyinfra makes its callback list then
    servers = servers_of(state)
    assert servers_of(state) is servers is memory_of(state).wheelhouse_servers
    assert memory_of(_state()).wheelhouse_servers is None
    assert state.callback_handlers.count(servers) == 1
