"""The commands pyinfra would run, per host and operation, for a deploy file — without running any of them.

    python -m tests.support.pyinfra_plan INVENTORY DEPLOY_FILE   ->  JSON {host: [{"name", "changes", "commands"}]}

pyinfra's `--dry` shows which operations would change a host, but not their commands. This does what the CLI does up
to that point (load the inventory and its group data, connect, load the deploy file once per host: the same pyinfra
functions), then asks each operation for its commands the way pyinfra's change detection does, under the same
context. Run it in a subprocess: pyinfra keeps its state in module globals.
"""

from __future__ import annotations

import json
import os
import sys

import pyinfra
from pyinfra.api import Config, State
from pyinfra.api.connect import connect_all
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_config, ctx_host, ctx_inventory, ctx_state
from pyinfra_cli.inventory import make_inventory
from pyinfra_cli.util import load_deploy_file

from tests.support.operation_cases import render


def plan(inventory_path: str, deploy_file: str) -> dict[str, list[dict]]:
    pyinfra.is_cli = True  # local.include (deploy.py) works only in CLI mode
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    state = State(check_for_changes=True)
    state.cwd = cwd
    ctx_state.set(state)
    config = Config()
    ctx_config.set(config)
    config.lock_current_state()
    inventory = make_inventory(inventory_path, cwd=cwd)
    ctx_inventory.set(inventory)
    state.init(inventory, config)
    state.set_stage(StateStage.Connect)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    load_deploy_file(state, deploy_file)
    found: dict[str, list[dict]] = {host.name: [] for host in inventory}
    for op_hash in state.get_op_order():
        meta = state.get_op_meta(op_hash)
        for host in inventory:
            op_data = state.ops[host].get(op_hash)
            if op_data is None:
                continue
            with ctx_host.use(host):
                commands = [render(command) for command in op_data.command_generator()]
            found[host.name].append(
                {"name": ", ".join(sorted(meta.names)), "changes": bool(commands), "commands": commands}
            )
    return found


if __name__ == "__main__":
    json.dump(plan(sys.argv[1], sys.argv[2]), sys.stdout, indent=2)
    sys.stdout.write("\n")
