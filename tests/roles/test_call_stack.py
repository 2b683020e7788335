"""roles/call_stack.py: pyinfra's operation order from the call stack, computed with and without source lines."""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

import pyinfra
from pyinfra.api import util

import roles  # noqa: F401  (installs the change)


def test_importing_roles_installs_it():
    assert util.stack is not inspect.stack and util.stack.keywords == {"context": 0}
    assert util.getframeinfo is not inspect.getframeinfo and util.getframeinfo.keywords == {"context": 0}


def _order_from_a_deploy_file(tmp_path, monkeypatch) -> list:
    """The order pyinfra computes for a call made three frames deep in a deploy file it exec'd (a file that is no
    module's: the case that made inspect scan every module), through a function of another file."""
    monkeypatch.setattr(pyinfra, "is_cli", True)
    helper = tmp_path / "helper_tasks.py"
    helper.write_text("def plan(order):\n    return order()\n")
    deploy = tmp_path / "deploy.py"
    deploy.write_text(
        "import helper_tasks\n\ndef stage():\n    return helper_tasks.plan(ORDER)\n\n\nRESULT = stage()\n"
    )
    state = SimpleNamespace(current_deploy_filename=str(deploy), current_op_file_number=7)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("helper_tasks", None)
    scope = {"ORDER": lambda: util.get_operation_order_from_stack(state)}
    exec(compile(deploy.read_text(), str(deploy), "exec"), scope)
    return scope["RESULT"]


def test_the_order_is_the_one_pyinfras_own_calls_give(tmp_path, monkeypatch):
    with_change = _order_from_a_deploy_file(tmp_path, monkeypatch)
    monkeypatch.setattr(util, "stack", inspect.stack)
    monkeypatch.setattr(util, "getframeinfo", inspect.getframeinfo)
    unchanged = _order_from_a_deploy_file(tmp_path, monkeypatch)
    # The file number, then the deploy file's lines (RESULT = stage(), return helper_tasks.plan), the helper's, and the
    # lambda's line in this test file.
    assert with_change == unchanged
    assert with_change[:4] == [7, 7, 4, 2]
