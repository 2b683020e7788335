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
Everything else is read each time, as pyinfra does. Kept in the run's memory (roles/run_memory.py, `fact_reads`) per
host; a value read while planning is never used at execution unless `across_execution`.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.context import ctx_state

from roles.run_memory import memory_of


def _key(fact_cls, kwargs: dict[str, Any], across_execution: bool) -> tuple:
    phase = "run" if across_execution else ("execute" if ctx_state.get().is_executing else "plan")
    return host.name, fact_cls.__name__, tuple(sorted((k, repr(v)) for k, v in kwargs.items())), phase


def read(fact_cls, *, across_execution: bool = False, **kwargs):
    """host.get_fact(fact_cls, **kwargs), asked of the host once per run (and phase, unless across_execution)."""
    reads = memory_of(ctx_state.get()).fact_reads
    key = _key(fact_cls, kwargs, across_execution)
    if key not in reads:
        reads[key] = host.get_fact(fact_cls, **kwargs)
    return reads[key]


def keep(fact_cls, value, **kwargs) -> None:
    """Offer `value`, just read and still true (the caller changed nothing), to the next `take` of this phase."""
    memory_of(ctx_state.get()).fact_reads[_key(fact_cls, kwargs, False)] = value


def take(fact_cls, **kwargs):
    """The value kept for this fact in this phase (once), or host.get_fact(fact_cls, **kwargs)."""
    reads = memory_of(ctx_state.get()).fact_reads
    key = _key(fact_cls, kwargs, False)
    if key in reads:
        return reads.pop(key)
    return host.get_fact(fact_cls, **kwargs)
