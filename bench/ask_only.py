"""Benchmark peer (not a stage): pyinfra asking every host the no-op deploy's questions, and nothing else.

    ROCM_FLEET_ASK=/tmp/ask.json pyinfra INVENTORY bench/ask_only.py -y

$ROCM_FLEET_ASK holds a JSON list of shell commands: the read-ahead's commands (roles/run_reads.py) of one host, as
bench/run_probe.py recorded them in a no-op re-deploy. Each is asked of every host as pyinfra's own `Command` fact
(its output read, not printed, as a fact's is), then one `true` runs, as in the floor (`exec -- true`). Its cost
above the floor is the hosts' own work of answering — their shells, find, python3 — and the SSH transfer of the
answers; the provisioning stages of a no-op re-deploy cost this plus what rocm-fleet does on the controller.
"""

import json
import os
from pathlib import Path

from pyinfra import host
from pyinfra.facts.server import Command
from pyinfra.operations import server

for command in json.loads(Path(os.environ["ROCM_FLEET_ASK"]).read_text()):
    host.get_fact(Command, command)
server.shell(name="true", commands=["true"])
