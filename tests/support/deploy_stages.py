"""deploy.py's stage list for tests. deploy.py cannot be imported (importing it runs the deploy), so its `STAGES` is
read from its source: each stage's name and the deploy it names, imported from where deploy.py imports it."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable

from tests.support.venvs import REPO


def deploy_stages() -> dict[str, Callable[[], None]]:
    """{stage name: its deploy}, in deploy.py's order."""
    tree = ast.parse((REPO / "deploy.py").read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    [listed] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [ast.unparse(target) for target in node.targets] == ["STAGES"]
    ]
    assert isinstance(listed, ast.Dict), "deploy.py's STAGES is a dict literal: {name: deploy}"
    stages = {}
    for key, value in zip(listed.keys, listed.values):
        module, name = imported[value.id]
        stages[key.value] = getattr(importlib.import_module(module), name)
    return stages
