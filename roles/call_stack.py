"""pyinfra's operation order, computed without reading source files: the same answer for a seventh of the CPU.

In CLI mode pyinfra orders each host's operations by the line numbers of the call stack that created each one
(`pyinfra.api.util.get_operation_order_from_stack`, once per operation and host). It calls `inspect.stack()` and
`inspect.getframeinfo()` with their default context of one source line: for every frame, the frame's source is
found through `inspect.getmodule`, which — for a file that is no module's own, as the deploy files pyinfra exec's
are — scans every loaded module each time. A no-op deploy's 15 operations cost 0.07–0.09 s of controller CPU per
host that way (0.6 s at 8 hosts; bench/fleet_scale.py), 0.01 s with no context lines. pyinfra reads only each
frame's file name and line number (pyinfra 3.10's api/util.py), which the context does not change;
tests/roles/test_call_stack.py computes the order both ways and compares.

Installed when the roles package is imported (roles/__init__.py): every task and deploy.py import it first.
"""

from __future__ import annotations

import functools
import inspect

from pyinfra.api import util


def install() -> None:
    util.stack = functools.partial(inspect.stack, context=0)
    util.getframeinfo = functools.partial(inspect.getframeinfo, context=0)
