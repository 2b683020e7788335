"""The import rules, read from the source with `ast`: verify/'s imports point down only; the verifier never imports
what is built on it (roles/, tasks/, localfleet/, bench/, deploy.py — nor pyinfra: it runs on the workstation with the
standard library and pyelftools), while that code imports any verify module directly; and no module of verify/,
roles/ or tasks/ imports itself through others (an import circle; TYPE_CHECKING imports count too). localfleet/'s
modules import each other (relatively) without a cycle either.

The layers of verify/, bottom to top (LAYERS): a module may import from its own package and from the layers below it,
never from one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = (
    "safe_read",
    "ld",
    "stack",
    "debian",
    "system",
    "question",
    "report",
    "checks",
    "commands",
    "cli",
    "__main__",
    "launcher",  # the installed verifier's entry: it checks the version, then runs verify.cli from it
)
# What is built on the verifier; the verifier imports none of it.
ABOVE = ("roles", "tasks", "localfleet", "bench", "deploy", "pyinfra", "pyinfra_cli")
# Where no module may import itself through others (localfleet/ imports relatively: another test's concern).
NO_CIRCLES = ("verify", "roles", "tasks")


def module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, top: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in `path`, at any depth (imports inside functions included);
    `from verify.ld import image` names the module verify.ld.image."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                is_module = (top / Path(*submodule.split("."))).with_suffix(".py").is_file() or (
                    top / Path(*submodule.split(".")) / "__init__.py"
                ).is_file()
                found.append((node.lineno, submodule if is_module else node.module))
    return list(dict.fromkeys(found))  # `from verify.x import a, b`: one import of verify.x


def layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "verify"


def problems(top: Path) -> list[str]:
    """Every upward import in verify/, every import of what is built on it, and every import circle, one line each,
    in the tree at `top`."""
    found = []
    graph: dict[str, set[str]] = {}
    for package in NO_CIRCLES:
        for path in sorted((top / package).rglob("*.py")):
            source = module_name(path, top)
            graph[source] = {target for _, target in imports_of(path, top) if target.split(".")[0] in NO_CIRCLES}
    for path in sorted((top / "verify").rglob("*.py")):
        source = module_name(path, top)
        for line, target in imports_of(path, top):
            where = f"{path.relative_to(top)}:{line}"
            if target.split(".")[0] in ABOVE:
                found.append(f"{where}: {source} imports {target}: the verifier never imports what is built on it")
                continue
            if target.split(".")[0] != "verify":
                continue
            mine, theirs = layer(source), layer(target)
            if theirs == "verify" or mine == theirs:
                continue
            if mine not in LAYERS or theirs not in LAYERS:
                found.append(f"{where}: {source} or {target} is in no layer: add it to LAYERS")
            elif LAYERS.index(theirs) > LAYERS.index(mine):
                found.append(f"{where}: upward import: {source} ({mine}) imports {target} ({theirs})")
    found += [f"import cycle: {' → '.join(cycle)}" for cycle in _cycles(graph)]
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, done, path = [], set(), []

    def visit(node: str) -> None:
        if node in path:
            cycles.append(path[path.index(node) :] + [node])
            return
        if node in done or node not in graph:
            return
        path.append(node)
        for target in sorted(graph[node]):
            visit(target)
        path.pop()
        done.add(node)

    for node in sorted(graph):
        visit(node)
    return cycles


def package_imports(path: Path, top: Path, package: str) -> set[str]:
    """The modules of `package` that `path` imports, at any depth (inside functions, under TYPE_CHECKING), absolute
    or relative: `from .host import FleetHost` in localfleet/fleet.py names localfleet.host; `from . import container`
    names localfleet.container."""
    source = module_name(path, top)
    here = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    modules = {module_name(p, top) for p in (top / package).rglob("*.py")}
    return {name for name in found if name in modules and name != package and name != source}


def package_cycles(top: Path, package: str) -> list[str]:
    graph = {
        module_name(path, top): package_imports(path, top, package)
        for path in sorted((top / package).rglob("*.py"))
        if path.name != "__init__.py"  # the package's front door re-exports its modules, which never import it
    }
    return [f"import cycle: {' → '.join(cycle)}" for cycle in _cycles(graph)]


def test_the_verifier_imports_point_down_nothing_built_on_it_and_nothing_imports_itself():
    assert problems(REPO) == []


def test_localfleets_modules_import_each_other_without_a_cycle():
    assert package_cycles(REPO, "localfleet") == []


def test_a_cycle_through_a_relative_or_a_type_checking_import_is_named(tmp_path):
    top = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import A\n",
            "pkg/a.py": "from . import b\nfrom .c import C\n",
            "pkg/b.py": "import os\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n",
        },
    )
    assert package_cycles(top, "pkg") == ["import cycle: pkg.a → pkg.c → pkg.a"]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_an_upward_import_an_import_of_what_is_built_on_the_verifier_and_circles_are_each_named(tmp_path):
    """The rules themselves, on a small tree: each kind of break is found (the real tree has none)."""
    top = _tree(
        tmp_path,
        {
            "verify/__init__.py": "",
            "verify/ld/__init__.py": "",
            "verify/ld/elf.py": "from verify.report import report\n",  # ld is below report
            "verify/report/__init__.py": "",
            "verify/report/report.py": "import verify.report.drift\n",
            "verify/report/drift.py": "from verify.report.report import Report\n",  # a cycle inside one layer
            "verify/checks/__init__.py": "",
            "verify/checks/apt.py": "def pins():\n    from pyinfra.api import FactBase\n",
            "roles/__init__.py": "",
            "roles/summary.py": "from verify.report.drift import compare_reports\n",  # allowed: a direct import
            "roles/memory.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from roles.pull import S\n",
            "roles/pull.py": "from roles.memory import memory_of\n",
            "tasks/status.py": "from roles.summary import compare_reports\n",
        },
    )
    assert problems(top) == [
        "verify/checks/apt.py:2: verify.checks.apt imports pyinfra.api: the verifier never imports what is built on it",
        "verify/ld/elf.py:1: upward import: verify.ld.elf (ld) imports verify.report.report (report)",
        "import cycle: roles.memory → roles.pull → roles.memory",
        "import cycle: verify.report.drift → verify.report.report → verify.report.drift",
    ]
