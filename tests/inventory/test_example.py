"""The repository's fleet: the top-level `inventory` (the file `pyinfra inventory …` reads; it points at
inventories/example.py) loads the way the pyinfra CLI loads it, with the group data in the top-level group_data/;
every host's data passes the contract of roles/settings.py (the example never teaches a key that the deploy refuses);
inventories and group data are data only; and group_data/ gives nothing to the hosts of other inventories run from
the checkout (the local test fleets', the tests' own).

The literal commands over SSH (`pyinfra inventory deploy.py --dry` …) are in test_command_line.py.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from localfleet.inventory import GROUP as LOCALFLEET_GROUP

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PYINFRA_PROGRESS": "off"}
HOSTS = ["ws-ml-01.lab.example.org", "ws-ml-02.lab.example.org", "ws-ml-03.lab.example.org", "rf-07.lab.example.org"]

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


def _inventory(path: str = "inventory") -> list[dict]:
    """The hosts of `path` (as given to pyinfra, relative to the repository root), with some of their data."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, path, *KEYS], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _data_files() -> list[Path]:
    return [
        REPO / "inventory",
        *sorted((REPO / "inventories").glob("*.py")),
        *sorted((REPO / "group_data").glob("*.py")),
    ]


def test_the_word_inventory_names_the_example_fleet_for_the_pyinfra_cli():
    """`pyinfra inventory …` as typed: the CLI itself resolves the word to the fleet file, with its group data."""
    done = subprocess.run(
        [PYINFRA, "inventory", "debug-inventory", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    hosts = {host["name"]: host for host in json.loads(done.stdout)}
    assert list(hosts) == HOSTS
    assert hosts["ws-ml-01.lab.example.org"]["groups"][:2] == ["lab_fleet", "ml_lab"]
    assert hosts["ws-ml-01.lab.example.org"]["data"]["ssh_user"] == "fleetadmin"  # group_data/lab_fleet.py


def test_the_top_level_inventory_is_the_example_file():
    assert (REPO / "inventory").is_file()
    assert (REPO / "inventory").resolve() == REPO / "inventories" / "example.py"
    assert _inventory("inventory") == _inventory("inventories/example.py")


def test_every_example_host_passes_validation():
    inventory = _inventory()
    assert [host["name"] for host in inventory] == HOSTS
    for host in inventory:
        assert host["problems"] == [], host["problems"]


def test_group_data_layers_apply():
    hosts = {host["name"]: host for host in _inventory()}
    lab = hosts["ws-ml-01.lab.example.org"]["data"]
    assert (lab.get("ssh_user"), lab.get("_sudo"), lab.get("venv_path"), lab.get("dpkg_lock_timeout")) == (
        "fleetadmin",
        True,
        "/opt/ml-lab/venv",
        600,
    )
    shared = hosts["ws-ml-03.lab.example.org"]["data"]
    assert shared.get("venv_path") == "/home/amira/venvs/rocm-fleet"  # host data wins over group data
    render = hosts["rf-07.lab.example.org"]["data"]
    assert (render.get("ssh_user"), render.get("venv_path"), render.get("rocm_other_release")) == (
        "fleetadmin",
        None,
        "side-by-side",
    )


def test_every_host_of_an_example_fleet_gets_its_login():
    """The fleet-wide data is on a group, not in group_data/all.py (see below): a host left out of that group would
    be reached as whoever runs pyinfra, without sudo."""
    fleets = sorted((REPO / "inventories").glob("*.py"))
    assert fleets
    for path in fleets:
        hosts = _inventory(str(path.relative_to(REPO)))
        assert hosts, path
        for host in hosts:
            assert host["data"]["ssh_user"] is not None, (path, host)


def test_group_data_reaches_only_the_groups_of_the_repositorys_fleets():
    """pyinfra loads group_data/ from the directory it runs in, for whatever inventory it is given: bin/demo's local
    fleet, the test fleets and the tests' own inventories all run from the repository root. So no all.py, and no
    file for a group that an inventory other than the repository's fleets uses."""
    defined = set()
    for path in sorted((REPO / "inventories").glob("*.py")):
        tree = ast.parse(path.read_text())
        defined |= {target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets}
    files = {path.stem for path in (REPO / "group_data").glob("*.py")}
    assert "all" not in files
    assert LOCALFLEET_GROUP not in files
    assert files <= defined, f"group_data/ for groups no fleet in inventories/ defines: {sorted(files - defined)}"


def test_the_readmes_fleet_commands_name_files_that_exist():
    """README "On your fleet": what `cp` copies and `ln` links, and every `pyinfra inventory FILE` (the commands
    themselves run in test_command_line.py)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## On your fleet\n```sh\n(.*?)^```", readme, re.M | re.S)
    assert block, "README.md has no ```sh block under '## On your fleet'"
    commands = [shlex.split(line.split("#", 1)[0]) for line in block.group(1).splitlines() if line.strip()]
    pyinfra = [argv for argv in commands if argv[0] == "pyinfra"]
    assert [argv[:2] for argv in pyinfra] == [["pyinfra", "inventory"]] * len(pyinfra) and pyinfra, commands
    for argv in pyinfra:
        assert (REPO / argv[2]).is_file(), argv
    copy = next(argv for argv in commands if argv[0] == "cp")
    link = next(argv for argv in commands if argv[0] == "ln")
    assert (REPO / copy[1]).is_file() and link[-2:] == [copy[2], "inventory"], (copy, link)


@pytest.mark.parametrize("path", _data_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_inventory_files_hold_data_only(path):
    """No imports, calls or code: module-level assignments of literals (and docstrings)."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        assert isinstance(node, ast.Assign), f"{path}: line {node.lineno} is not a data assignment"
        ast.literal_eval(node.value)
