"""inventory/: the example fleet loads the way the pyinfra CLI loads it (inventory file plus group_data/) and every
host's data passes the contract of roles/settings.py — the example never teaches a key that the deploy refuses."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Loaded in a child process: importing pyinfra_cli runs gevent's monkey.patch_all(), which would turn every later
# test's threads in this pytest process into greenlets (a thread blocked in flock() then freezes the whole run).
LOAD = """
import json, sys
from pyinfra.api import State
from pyinfra.context import ctx_state
from pyinfra_cli.inventory import make_inventory
from roles.settings import check_host
keys = sys.argv[2:]
with ctx_state.use(State()):  # the CLI loads inventory files with a state in context
    inventory = make_inventory(sys.argv[1], cwd=".")
hosts = []
for host in inventory:
    _settings, problems = check_host(host)
    hosts.append({"name": host.name, "data": {key: host.data.get(key) for key in keys},
                  "problems": [problem.line() for problem in problems]})
print(json.dumps(hosts))
"""
KEYS = ("ssh_user", "_sudo", "venv_path", "dpkg_lock_timeout", "rocm_other_release")


def _inventory() -> list[dict]:
    done = subprocess.run([sys.executable, "-c", LOAD, str(REPO / "inventory" / "example.py"), *KEYS],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_example_host_passes_validation():
    inventory = _inventory()
    names = [host["name"] for host in inventory]
    assert names == ["ws-ml-01.lab.example.org", "ws-ml-02.lab.example.org", "ws-ml-03.lab.example.org",
                     "rf-07.lab.example.org"]
    for host in inventory:
        assert host["problems"] == [], host["problems"]


def test_group_data_layers_apply():
    hosts = {host["name"]: host for host in _inventory()}
    lab = hosts["ws-ml-01.lab.example.org"]["data"]
    assert (lab.get("ssh_user"), lab.get("_sudo"), lab.get("venv_path"), lab.get("dpkg_lock_timeout")) == (
        "fleetadmin", True, "/opt/ml-lab/venv", 600)
    shared = hosts["ws-ml-03.lab.example.org"]["data"]
    assert shared.get("venv_path") == "/home/amira/venvs/rocm-fleet"  # host data wins over group data
    render = hosts["rf-07.lab.example.org"]["data"]
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
