"""Data-driven operation and fact tests in the shape of pyinfra's own (tests/operations/*.json, tests/facts/*.json).

An operation case gives the *output lines of each fact's command* (keyed by the fact class's name), the operation's
arguments, and what must come out: the commands, or — when there are none — the noop description:

    {"args": {...}, "facts": {"InstalledRocm": ["tree /opt/rocm-7.2.4 7.2.4-93", ...]},
     "commands": [...], "noop_description": "..."}

The fact's own `process()` turns the lines into the value the operation sees (no lines: the fact's default), so a case
exercises the parser and the operation together, as a host's real output would. Commands are compared as text;
commands that run Python show as "tell: MESSAGE" (prints why) and "fail: REASON" (fails the host), package
commands wrapped to wait for the dpkg lock as "[dpkg lock wait 300 s] COMMAND", and commands run under the host lock
(roles/host_lock.py) as "[host lock wait 300 s: WHAT] COMMAND".

A fact case gives the fact's arguments, real output lines, and the parsed value as JSON:

    {"arguments": {...}, "command": "...", "output": [...], "fact": {...}}
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from pyinfra.api import FunctionCommand, StringCommand
from pyinfra.context import ctx_host, ctx_state

from roles.debian.apt_commands import with_dpkg_lock_timeout
from roles.host_lock import LOCK_FILE, PRIVATE, under_host_lock
from roles.verifier import launcher_sha256, version
from tests.support.pyinfra_ops import FakeHost
from verify.question import Question

# What a case writes in place of values that change with every edit of verify/ (the launcher's sha256, this checkout's
# verifier version): in the facts' output, they stand for the real values; in the commands, the real values show so.
PLACEHOLDERS = {"<launcher-sha256>": launcher_sha256, "<verifier-version>": version}


def _with_values(line: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value())
    return line


def _with_placeholders(text: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(value(), placeholder)
    return text


_LOCK_GUARD = re.compile(r"^cfg=.*?echo 'DPkg::Lock::Timeout \"(\d+)\";' .*?; do \( (.*) \) > \"\$log\" 2>&1; rc=")
_HOST_LOCK = re.compile(
    "^"
    + re.escape(PRIVATE)
    + r" && \( if ! flock -w (\d+) 9; .*?; fi; echo 'changing (.*?)' .*? > "
    + re.escape(LOCK_FILE)
    + r"; (.*) \) 9>> "
    + re.escape(LOCK_FILE)
    + "$",
    re.DOTALL,
)


class OutputHost(FakeHost):
    """A stand-in host whose facts are computed from given command output by the real fact classes."""

    def get_fact(self, fact_cls, *args, **kwargs):
        assert not args, "pass fact arguments by keyword"
        name = fact_cls.__name__
        self.asked.append(name)
        if name not in self.facts:
            raise KeyError(f"the case gives no output for fact {name} (given: {sorted(self.facts)})")
        lines = [_with_values(line) for line in self.facts[name]]
        fact = fact_cls()
        return fact.process(lines) if lines else fact.default()


def render(command) -> str:
    if isinstance(command, StringCommand):
        command = command.get_raw_value()
    if isinstance(command, str):  # operations may yield plain strings; pyinfra wraps them in StringCommand later
        return _with_placeholders(_unwrap_lock_guard(command.strip()))
    if isinstance(command, FunctionCommand):
        kind = {"_log_reason": "tell", "_fail_host": "fail"}.get(command.function.__name__)
        return f"{kind}: {command.args[0]}" if kind else f"python: {command.function.__name__}"
    return repr(command)


def _unwrap_lock_guard(text: str) -> str:
    """Show a command wrapped by roles.debian.apt_commands.with_dpkg_lock_timeout as "[dpkg lock wait N s] COMMAND", and
    one wrapped by roles.host_lock.under_host_lock as "[host lock wait N s: WHAT] COMMAND" — only when the wrapper is
    exactly that function's output (tests/roles/debian/test_apt_commands.py and test_host_lock.py prove the wrappers
    themselves)."""
    held = _HOST_LOCK.match(text)
    if held and under_host_lock(held.group(3), int(held.group(1)), held.group(2)) == text:
        return f"[host lock wait {held.group(1)} s: {held.group(2)}] {held.group(3)}"
    found = _LOCK_GUARD.match(text)
    if found and with_dpkg_lock_timeout(found.group(2), int(found.group(1))) == text:
        return f"[dpkg lock wait {found.group(1)} s] {found.group(2)}"
    return text


def run_operation(operation, facts: dict[str, list[str]], **arguments) -> tuple[list[str], OutputHost]:
    """(commands as text, the host with its noop descriptions and logged lines) of one run of the operation's body on
    a host with these fact outputs."""
    host = OutputHost(facts)
    with ctx_state.use(host.state), ctx_host.use(host):
        commands = [render(command) for command in operation._inner(**arguments)]
    return commands, host


def load_cases(directory: Path) -> list[tuple[str, dict]]:
    return [(path.stem, json.loads(path.read_text())) for path in sorted(directory.glob("*.json"))]


def jsonable(value: Any) -> Any:
    """Frozen dataclasses, tuples, frozensets -> plain JSON values (sets sorted), to compare with a case's "fact"."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: jsonable(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted(jsonable(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def grouped_cases(directory: Path) -> list[tuple[str, str, dict]]:
    """(subject, case name, case) for every <subject>/<case>.json under `directory`, where the subject is the name of
    a fact class or an operation."""
    return [
        (subject.name, name, case)
        for subject in sorted(p for p in directory.iterdir() if p.is_dir())
        for name, case in load_cases(subject)
    ]


def case_ids(cases: list[tuple[str, str, dict]]) -> list[str]:
    return [f"{subject}/{name}" for subject, name, _ in cases]


def case_arguments(args: dict) -> dict:
    """The operation's arguments from a case's "args": a "question" object is the host's question (verify/question.py),
    its fields by name."""
    if isinstance(args.get("question"), dict):
        paths = {"venv", "root", "metrics_dir"}
        fields = {key: Path(value) if key in paths and value else value for key, value in args["question"].items()}
        return {**args, "question": Question(**fields)}
    return args


def check_operation_case(operation, case: dict) -> None:
    """The operation, on a host with the case's fact outputs, yields exactly the case's commands; when it yields none,
    it gives the case's noop description (pyinfra's own rule: doing nothing must say what is already true), and when
    it yields some, no noop description. A case with "logged" gives every line the operation prints on the host."""
    commands, host = run_operation(operation, case["facts"], **case_arguments(case["args"]))
    assert commands == case["commands"]
    if case["commands"]:
        assert host.noops == []
    else:
        assert case.get("noop_description"), "a case with no commands needs a noop description"
        assert host.noops == [case["noop_description"]], "an operation that does nothing must say why"
    if "logged" in case:
        assert host.logged == case["logged"]


def process_fact(fact_cls, output: list[str]) -> Any:
    """What pyinfra hands an operation for this command output: process(lines), or the default when there are none."""
    fact = fact_cls()
    return fact.process(output) if output else fact.default()


def run_fact_here(fact_cls, **arguments) -> Any:
    """The fact's real command run on this machine with `sh -c`, processed as pyinfra would: for the facts whose
    answer here is known (this machine's OS, no ROCm installed)."""
    command = fact_cls().command(**arguments)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return process_fact(fact_cls, done.stdout.splitlines())
