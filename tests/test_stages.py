"""deploy.py's STAGES, the one stage list: each stage's task file runs that stage's deploy and nothing else, so that
deploy.py (which includes the task files in the list's order), a task run alone and the read-ahead (which asks what the
list's deploys read) agree. Whole runs: tests/tasks/test_deploy_fake.py."""

from __future__ import annotations

import ast

from tests.support.deploy_stages import deploy_stages
from tests.support.venvs import REPO


def _task(name: str) -> tuple[dict[str, str], list[str]]:
    """The task file's imports ({name: module}) and its statements, the docstring left out."""
    tree = ast.parse((REPO / "tasks" / f"{name}.py").read_text(encoding="utf-8"))
    imports = {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    body = [node for node in tree.body if not isinstance(node, ast.Import | ast.ImportFrom)]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return imports, [ast.unparse(node) for node in body]


def test_each_stage_has_a_task_file_that_runs_that_stages_deploy_and_nothing_else():
    stages = deploy_stages()
    assert list(stages) == [
        "preflight",
        "colliding_packages",
        "rocm",
        "venv",
        "strays",
        "apt_hook",
        "boot_check",
        "verify",
    ]
    for name, deploy in stages.items():
        imports, statements = _task(name)
        assert statements == ["require_valid_inventory()", f"{deploy.__name__}()"], name
        assert imports[deploy.__name__] == deploy.__module__, name


def test_every_stage_says_what_it_reads_ahead():
    for name, deploy in deploy_stages().items():
        assert hasattr(deploy, "reads"), f"{name}: {deploy} has no `reads` (None, or what it asks on a no-op run)"
