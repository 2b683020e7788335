"""inventory/: the example fleet loads the way the pyinfra CLI loads it (inventory file plus group_data/) and every
host's data passes the contract of roles/settings.py — the example never teaches a key that the deploy refuses."""

from __future__ import annotations

import ast
from pathlib import Path

from pyinfra.api import State
from pyinfra.context import ctx_state
from pyinfra_cli.inventory import make_inventory

from roles.settings import check_host

REPO = Path(__file__).resolve().parents[2]


def _inventory():
    with ctx_state.use(State()):  # the CLI loads inventory files with a state in context
        return make_inventory(str(REPO / "inventory" / "example.py"), cwd=str(REPO))


def test_every_example_host_passes_validation():
    inventory = _inventory()
    names = [host.name for host in inventory]
    assert names == ["ws-ml-01.lab.example.org", "ws-ml-02.lab.example.org", "ws-ml-03.lab.example.org",
                     "rf-07.lab.example.org"]
    for host in inventory:
        settings, problems = check_host(host)
        assert problems == (), [p.line() for p in problems]


def test_group_data_layers_apply():
    hosts = {host.name: host for host in _inventory()}
    lab = hosts["ws-ml-01.lab.example.org"].data
    assert (lab.get("ssh_user"), lab.get("_sudo"), lab.get("venv_path"), lab.get("dpkg_lock_timeout")) == (
        "fleetadmin", True, "/opt/ml-lab/venv", 600)
    shared = hosts["ws-ml-03.lab.example.org"].data
    assert shared.get("venv_path") == "/home/amira/venvs/rocm-fleet"  # host data wins over group data
    render = hosts["rf-07.lab.example.org"].data
    assert (render.get("venv_path"), render.get("rocm_other_release")) == (None, "side-by-side")


def test_inventory_files_hold_data_only():
    """No imports, calls or code in inventory/: module-level assignments of literals (and docstrings)."""
    for path in sorted((REPO / "inventory").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            assert isinstance(node, ast.Assign), f"{path}: line {node.lineno} is not a data assignment"
            ast.literal_eval(node.value)
