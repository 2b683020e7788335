"""Benchmark instrumentation (not a test, not a stage): where a pyinfra run's time, CPU and SSH round trips go.

    ROCM_FLEET_PROBE=/tmp/probe.json pyinfra INVENTORY bench/run_probe.py deploy.py -y

Given as the first deploy file of a run, it changes nothing on any host and adds no operation. It
- counts every command a host runs (one SSH channel = one round trip), every file put and got, per host, per phase
  (`plan`: while the deploy files are loaded; `execute`: while operations run) and per stage (the deploy name, e.g.
  "Venv", from the operation's name "Venv | …" or the deploy being loaded), which fact each command was for, and
  how long the host waited for them;
- records, for the first operation of every stage, when it started (CLOCK_MONOTONIC, the same clock in every process
  on the machine) and the controller CPU used until then (getrusage of this process: pyinfra is one OS thread);
- keeps the commands of the read-ahead (roles/run_reads.py's `_Batch` fact) per host, as the host's shell gets them
  (before sudo), and each fact's own command in them: bench/fleet_scale.py runs the former alone (bench/ask_only.py)
  as a peer, bench/read_ahead_parts.py the latter one by one;
- writes all of it as JSON to $ROCM_FLEET_PROBE when the last host disconnects (pyinfra's last callback of a run).
bench/fleet_scale.py reads it to split a run into its stages.
"""

from __future__ import annotations

import json
import os
import resource
import time

from pyinfra import host, state
from pyinfra.api.host import Host
from pyinfra.api.state import BaseStateCallback

_MARK = "_rocm_fleet_probe"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stage_name(name: str) -> str:
    """ "tasks/venv.py | Venv | torch==…" (an operation of an included task file) -> "Venv" """
    parts = name.split(" | ")
    if len(parts) > 1 and parts[0].endswith(".py"):
        parts = parts[1:]
    return parts[0]


def _stage_of(current: Host) -> str:
    if current.current_op_hash is not None:
        names = state.get_op_meta(current.current_op_hash).names
        return stage_name(sorted(names)[0] if names else "?")
    return stage_name(current.current_deploy_name or "(top level)")


class RunProbe(BaseStateCallback):
    def __init__(self, path: str):
        self.path = path
        self.loaded_at = (time.monotonic(), _cpu())
        self.calls: dict[str, int] = {}  # "host\tphase\tstage\tkind\twhat" -> count
        self.seconds: dict[str, float] = {}  # the same key -> wall seconds the host waited for those calls
        self.stage_start: dict[str, tuple[float, float]] = {}
        self.execute_start: tuple[float, float] | None = None
        self.disconnected: set[str] = set()
        self.batches: dict[str, list[str]] = {}  # host -> the read-ahead's commands, in order
        self.batch_parts: dict[str, list[str]] = {}  # host -> each fact's own command in them, in order

    def count(self, current: Host, kind: str, what: str, call, *args, **kwargs):
        phase = "execute" if state.is_executing else "plan"
        key = "\t".join((current.name, phase, _stage_of(current), kind, what))
        self.calls[key] = self.calls.get(key, 0) + 1
        started = time.monotonic()
        try:
            return call(current, *args, **kwargs)
        finally:
            self.seconds[key] = self.seconds.get(key, 0.0) + time.monotonic() - started

    def operation_start(self, state, op_hash):
        now = (time.monotonic(), _cpu())
        if self.execute_start is None:
            self.execute_start = now
        names = state.get_op_meta(op_hash).names
        self.stage_start.setdefault(stage_name(sorted(names)[0] if names else "?"), now)

    def host_disconnect(self, state, host):
        self.disconnected.add(host.name)
        if {h.name for h in state.activated_hosts} <= self.disconnected:
            self.write()

    def write(self) -> None:
        ended = (time.monotonic(), _cpu())
        document = {
            "loaded": self.loaded_at,
            "execute_start": self.execute_start,
            "stage_start": self.stage_start,
            "ended": ended,
            "batches": self.batches,
            "batch_parts": self.batch_parts,
            "calls": [
                dict(
                    zip(("host", "phase", "stage", "kind", "what"), key.split("\t")),
                    count=n,
                    seconds=self.seconds.get(key, 0.0),
                )
                for key, n in sorted(self.calls.items())
            ],
        }
        with open(self.path, "w") as out:
            json.dump(document, out)


def _raw(command) -> str:
    """A command as the host's shell gets it (a pyinfra StringCommand unmasked, or a plain string)."""
    return command.get_raw_value() if hasattr(command, "get_raw_value") else str(command)


def _install() -> RunProbe:
    probe = RunProbe(os.environ["ROCM_FLEET_PROBE"])
    state.add_callback_handler(probe)
    run_shell_command, put_file, get_file, get_fact = (
        Host.run_shell_command,
        Host.put_file,
        Host.get_file,
        Host.get_fact,
    )

    def counted_run(self, *args, **kwargs):
        what = getattr(self, _MARK + "_fact", None) or "operation"
        if what == "fact _Batch":
            command = args[0]
            probe.batches.setdefault(self.name, []).append(_raw(command))
        return probe.count(self, "command", what, run_shell_command, *args, **kwargs)

    def counted_put(self, *args, **kwargs):
        return probe.count(self, "put", "file", put_file, *args, **kwargs)

    def counted_get(self, *args, **kwargs):
        return probe.count(self, "get", "file", get_file, *args, **kwargs)

    def named_fact(self, fact, *args, **kwargs):
        setattr(self, _MARK + "_fact", f"fact {getattr(fact, '__name__', fact)}")
        if getattr(fact, "__name__", None) == "_Batch":
            probe.batch_parts.setdefault(self.name, []).extend(_raw(part) for part in kwargs.get("commands", ()))
        try:
            return get_fact(self, fact, *args, **kwargs)
        finally:
            setattr(self, _MARK + "_fact", None)

    Host.run_shell_command, Host.put_file, Host.get_file, Host.get_fact = (
        counted_run,
        counted_put,
        counted_get,
        named_fact,
    )
    return probe


# A deploy file runs once per host: install once per run.
if os.environ.get("ROCM_FLEET_PROBE") and not getattr(state, _MARK, None):
    setattr(state, _MARK, _install())
del host  # imported only so that pyinfra treats this file as deploy code for every host
