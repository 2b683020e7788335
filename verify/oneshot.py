"""The garbage-collector policy of a verifier process: it runs one command, then exits.

Python's cyclic collector runs every 700 new container objects (walking the young ones, and every tenth time the
older ones too) and once more over everything at interpreter exit. A verifier process makes no cyclic garbage worth
that work — its imports' modules, classes and functions live to the end, an analysis builds trees of immutable
records — so the collector finds nothing, at a cost of about 12 ms: 14% of the CPU time of analysing the 149
libraries of a torch venv in one process (bench/linkage.py, the deployed form), most of it during the imports and at
exit. Inside `one_command_process()` the collector is off; on the way out everything alive is frozen (gc.freeze), so
the collection at exit skips it, and the collector is switched back on if it was on.

For the process of one command only: verify.cli.main and the apt hook's entry use it. A library user (pyinfra, the
tests) never does: frozen objects are never collected afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_command_process() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
