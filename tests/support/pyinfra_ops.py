"""Run a pyinfra operation's body or a fact's parser on data, the way pyinfra's own tests do (tests/operations/*.json).

    commands, noops = run_operation(stray_packages, facts={"DistroRocmStrays": report}, policy="remove")

The operation body runs under pyinfra's context with a stand-in host whose facts come from the dict (keyed by the
fact class's name; a fact asked for with arguments is keyed "Name:arg=value,…" in sorted order). Nothing connects
anywhere: this proves what an operation *decides* from given facts. Real runs are tested elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyinfra.api import FunctionCommand, StringCommand
from pyinfra.api.command import FileUploadCommand
from pyinfra.context import ctx_host, ctx_state


class _State:
    """Enough of pyinfra's State for operation bodies (weak-referenceable, not executing, no config)."""

    is_executing = False
    print_noop_info = False

    def __init__(self) -> None:
        self.config = type("Config", (), {"DIFF": False})()
        self.cwd = None


class FakeHost:
    def __init__(self, facts: dict[str, Any], data: dict[str, Any] | None = None, name: str = "testhost"):
        self.facts = dict(facts)
        self.data = type("Data", (), {"get": lambda _self, key, default=None: (data or {}).get(key, default)})()
        self.name = name
        self.state = _State()
        self.noops: list[str] = []
        self.logged: list[str] = []
        self.asked: list[str] = []
        self.current_op_global_arguments: dict = {}

    @staticmethod
    def fact_key(fact_cls, kwargs: dict[str, Any]) -> str:
        name = fact_cls.__name__
        if not kwargs:
            return name
        return name + ":" + ",".join(f"{key}={kwargs[key]}" for key in sorted(kwargs))

    def get_fact(self, fact_cls, *args, **kwargs):
        assert not args, "pass fact arguments by keyword"
        key = self.fact_key(fact_cls, {k: v for k, v in kwargs.items() if not k.startswith("_")})
        self.asked.append(key)
        if key not in self.facts:
            raise KeyError(f"the test gives no fact {key!r} (facts given: {sorted(self.facts)})")
        return self.facts[key]

    def noop(self, description: str) -> None:
        self.noops.append(description)

    def log_styled(self, message: str, **_kwargs) -> None:
        self.logged.append(message)

    def log(self, message: str, *_args, **_kwargs) -> None:
        self.logged.append(message)

    def get_temp_filename(self, *parts, **_kwargs) -> str:
        return "/tmp/pyinfra-temp"


def command_text(command) -> str:
    if isinstance(command, StringCommand):
        return command.get_raw_value()
    if isinstance(command, FileUploadCommand):
        return f"upload {command.src} -> {command.dest}"
    if isinstance(command, FunctionCommand):
        return f"{command.function.__name__}({', '.join(map(repr, command.args))})"
    return str(command)


def run_operation(operation, facts: dict[str, Any], data: dict[str, Any] | None = None,
                  **arguments) -> tuple[list[str], list[str], FakeHost]:
    """(commands as text, noop descriptions, the host) of one plan-time run of the operation's body."""
    fake = FakeHost(facts, data)
    with ctx_state.use(fake.state), ctx_host.use(fake):
        commands = [command_text(command) for command in operation._inner(**arguments)]
    return commands, fake.noops, fake


def load_cases(directory: Path) -> list[tuple[str, dict]]:
    """(case name, case) for every *.json in `directory`, sorted: pytest ids are the file names."""
    return [(path.stem, json.loads(path.read_text())) for path in sorted(directory.glob("*.json"))]
