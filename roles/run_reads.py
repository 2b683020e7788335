"""Facts a run reads once per host where nothing the run does in between can change them.

pyinfra 3 caches no facts: every `host.get_fact` is another command over SSH, and some are not cheap on the host
(VenvContents walks every file of the venv, ~25,000 with torch). A no-op re-deploy asked several of them twice:
- VenvPathAccess in preflight and again in the venv stage (which also runs alone), OsReleaseFile and InstalledRocm in
  preflight and again in the ROCm stage, all while planning — nothing has executed in between, so the second read can
  only repeat the first: `read(...)`;
- HostPython3 while planning the venv stage and again when its venv operation executes — what runs in between
  (installing python3-venv, uploading the wheelhouse) cannot change the host's python3 minor version, all the venv
  operation compares (python3-venv pins the python3 of its own release): `read(..., across_execution=True)`; a host
  that had no python3 while planning is asked again;
- VenvContents when the venv operation executes and again when the packages operation after it executes — the
  same unless the first changed the venv: the first `keep`s what it read only when it does nothing, the second
  `take`s it.
Everything else is read each time, as pyinfra does. Kept per run (the pyinfra State, weakly: a pytest process runs
many) and per host; a value read while planning is never used at execution unless `across_execution`.
"""

from __future__ import annotations

import weakref
from typing import Any

from pyinfra import host
from pyinfra.context import ctx_state

_runs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _memory() -> dict | None:
    state = ctx_state.get()
    if state is None:
        return None
    try:
        return _runs.setdefault(state, {})
    except TypeError:  # a stand-in state that cannot be weakly referenced: remember nothing
        return None


def _key(fact_cls, kwargs: dict[str, Any], across_execution: bool) -> tuple:
    phase = "run" if across_execution else ("execute" if getattr(ctx_state.get(), "is_executing", False) else "plan")
    return host.name, fact_cls.__name__, tuple(sorted((k, repr(v)) for k, v in kwargs.items())), phase


def read(fact_cls, *, across_execution: bool = False, **kwargs):
    """host.get_fact(fact_cls, **kwargs), asked of the host once per run (and phase, unless across_execution)."""
    memory = _memory()
    if memory is None:
        return host.get_fact(fact_cls, **kwargs)
    key = _key(fact_cls, kwargs, across_execution)
    if key not in memory:
        memory[key] = host.get_fact(fact_cls, **kwargs)
    return memory[key]


def keep(fact_cls, value, **kwargs) -> None:
    """Offer `value`, just read and still true (the caller changed nothing), to the next `take` of this phase."""
    memory = _memory()
    if memory is not None:
        memory[_key(fact_cls, kwargs, False)] = value


def take(fact_cls, **kwargs):
    """The value kept for this fact in this phase (once), or host.get_fact(fact_cls, **kwargs)."""
    memory = _memory()
    key = _key(fact_cls, kwargs, False)
    if memory is not None and key in memory:
        return memory.pop(key)
    return host.get_fact(fact_cls, **kwargs)
