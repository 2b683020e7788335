"""The verifier's layers, read from the source with `ast`: verify/'s imports point down only, no module imports
itself through others, and code outside verify/ (roles/, localfleet/, bench/, tasks/, deploy.py) uses the verifier
only through verify/api.py. localfleet/'s modules import each other without a cycle either (an import made only for
type checking counts: it is a cycle a reader follows all the same).

The layers of verify/, bottom to top (README "Architecture"): a module may import from its own package and from the
layers below it, never from one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = (
    "oneshot",
    "safe_read",
    "ld",
    "stack",
    "debian",
    "system",
    "report",
    "checks",
    "commands",
    "cli",
    "__main__",
    "api",
)
PUBLIC = "verify.api"
OUTSIDE = ("roles", "localfleet", "bench", "tasks", "deploy.py")


def module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, top: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of a `verify` module in `path`, at any depth (the apt hook imports inside a
    function); `from verify.ld import image` names the module verify.ld.image."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "verify"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "verify"
        ):
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
    """Every upward import, import cycle and use of the verifier from outside it other than through verify/api.py,
    one line each, in the tree at `top`."""
    found = []
    graph: dict[str, set[str]] = {}
    for path in sorted((top / "verify").rglob("*.py")):
        source = module_name(path, top)
        graph[source] = set()
        for line, target in imports_of(path, top):
            graph[source].add(target)
            mine, theirs = layer(source), layer(target)
            if theirs == "verify" or mine == theirs:
                continue
            if mine not in LAYERS or theirs not in LAYERS:
                found.append(f"{path.relative_to(top)}:{line}: {source} or {target} is in no layer: add it to LAYERS")
            elif LAYERS.index(theirs) > LAYERS.index(mine):
                found.append(
                    f"{path.relative_to(top)}:{line}: upward import: {source} ({mine}) imports {target} ({theirs})"
                )
    found += [f"import cycle: {' → '.join(cycle)}" for cycle in _cycles(graph)]
    for place in OUTSIDE:
        paths = [top / place] if place.endswith(".py") else sorted((top / place).rglob("*.py"))
        for path in paths:
            if not path.is_file():
                continue
            for line, target in imports_of(path, top):
                if target != PUBLIC:
                    found.append(
                        f"{path.relative_to(top)}:{line}: imports {target}: outside verify/, use "
                        f"{PUBLIC} (add the name there if it is missing)"
                    )
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


def test_the_verifier_imports_point_down_and_the_rest_use_its_public_module():
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


def test_an_upward_import_a_cycle_and_a_private_import_from_outside_are_each_named(tmp_path):
    """The rule itself, on a small tree: each kind of break is found (the real tree has none)."""
    top = _tree(
        tmp_path,
        {
            "verify/__init__.py": "",
            "verify/api.py": "from verify.report.report import Report\n",
            "verify/ld/__init__.py": "",
            "verify/ld/elf.py": "from verify.report import report\n",  # ld is below report
            "verify/report/__init__.py": "",
            "verify/report/report.py": "import verify.report.drift\n",
            "verify/report/drift.py": "from verify.report.report import Report\n",  # a cycle inside one layer
            "roles/__init__.py": "",
            "roles/summary.py": "from verify.api import Report\nfrom verify.report.drift import compare_reports\n",
            "bench/run.py": "def main():\n    from verify import api\n",
        },
    )
    assert problems(top) == [
        "verify/ld/elf.py:1: upward import: verify.ld.elf (ld) imports verify.report.report (report)",
        "import cycle: verify.report.report → verify.report.drift → verify.report.report",
        "roles/summary.py:2: imports verify.report.drift: outside verify/, use verify.api (add the name there if it "
        "is missing)",
    ]
