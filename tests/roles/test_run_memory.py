"""roles/run_memory.py: one memory per pyinfra run (State), held only as long as the State lives."""

from __future__ import annotations

import gc

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
    memory_of(state).verifier_planned.add("ws1")
    before = len(run_memory._memories)
    del state
    gc.collect()
    assert len(run_memory._memories) == before - 1
