"""tasks/venv.py for real, over SSH, on a local Debian 12 test workstation (localfleet), the way a real fleet runs it:
pyinfra logs in as the admin account with sudo, the venv belongs to the workstation's user, and the host installs
from the wheelhouse the controller prepared — offline: pip on these hosts cannot reach PyPI. A second run changes
nothing (read from pyinfra's own --json results)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root]

REPO = Path(__file__).resolve().parents[3]
VENV = "/opt/rocm-fleet/venv"
OPERATIONS = ["Venv | python3-venv", "Venv | Wheelhouse cp311-manylinux_2_36_x86_64", f"Venv | venv {VENV}"]


def deploy(inventory) -> tuple[int, dict, str]:
    done = subprocess.run([sys.executable, "-m", "pyinfra", "-y", "--json", str(inventory), "tasks/venv.py"],
                          capture_output=True, text=True, cwd=REPO)
    results = json.loads(done.stdout)["results"] if done.stdout.strip().startswith("{") else {}
    changed = {op["name"]: bool(op["success"]) for op in results.get("operations", [])}
    return done.returncode, changed, done.stderr + done.stdout[-3000:]


def test_venv_from_the_wheelhouse_offline_then_no_change():
    from localfleet.fleet import Fleet

    with Fleet.up(n=1, login="admin", data={"venv_owner": "alice"}) as fleet:
        host = fleet.host("ws1")
        host.run(["useradd", "--create-home", "alice"])
        # The stage installs python3-venv itself when a workstation lacks it.
        host.run(["apt-get", "purge", "-y", "-q", "python3-venv", "python3.11-venv"])
        offline = host.run([
            "python3", "-c", "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', timeout=10)",
        ], check=False)
        assert offline.returncode != 0, "this host reaches PyPI: the test would not prove an offline install"

        code, changed, log = deploy(fleet.inventory)
        assert code == 0, log
        assert all(changed[name] for name in OPERATIONS), (changed, log)
        packages = [name for name in changed if name.startswith("Venv | torch==2.13.0")]
        assert len(packages) == 1 and changed[packages[0]], changed

        versions = host.run([f"{VENV}/bin/python", "-c",
                             "import torch, bitsandbytes; print(torch.__version__, bitsandbytes.__version__)"])
        assert versions.stdout.split() == ["2.13.0+cpu", "0.50.1"]
        owners = host.run(["stat", "-c", "%U", VENV, f"{VENV}/bin/python3",
                           f"{VENV}/lib/python3.11/site-packages/torch/__init__.py"]).stdout.split()
        assert owners == ["alice", "alice", "alice"]

        code, changed, log = deploy(fleet.inventory)
        assert code == 0, log
        assert not any(changed.values()), (changed, log)
