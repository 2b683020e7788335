"""How a run asks its hosts questions (pyinfra facts): read ahead in one command per host, and asked again only once
the run has changed something there.

pyinfra 3 caches no facts: every `host.get_fact` is another command over SSH, one round trip each, and a stage's
operations ask theirs one after another. A no-op re-deploy asked every host 16 questions that way (bench/
fleet_scale.py counts them), most of the provisioning stages' time above pyinfra's own floor. Here:

- `read_ahead(asks)`: every fact in `asks` that this run has not read from the host yet, in ONE command — each fact's
  own command in a subshell of its own, all at the same time, its answer between marker lines that carry 128 random
  bits (nothing a file on the host prints can forge a boundary), each answer parsed by the fact's own `process`, as
  pyinfra would. A fact whose command fails, or that needs another shell or a required command, is left out: asked
  alone when it is read, with pyinfra's own error handling. Each stage says what it will read (`@stage(...,
  reads=)`, roles/stage.py); deploy.py reads ahead for all its stages at once, so a whole no-op deploy asks each host
  once.
- `ask(fact, **kwargs)` — what the stages call instead of `host.get_fact`: the answer read ahead, while this run has
  changed nothing on the host since (no operation on it has run a command yet; pyinfra runs a host's operations in
  order), else the host is asked now. After the first change every answer is fresh, as in pyinfra.
- `read(fact, **kwargs)`: asked once per run (and phase) where nothing the run does in between can change the answer
  — VenvPathAccess in preflight and in the venv stage (which also runs alone), OsReleaseFile and InstalledRocm in
  preflight and the ROCm stage, all while planning; with `across_execution=True`, also across the run's changes:
  HostPython3 — installing python3-venv or uploading the wheelhouse cannot change the host's python3 minor version,
  all the venv operation compares (a host that had no python3 while planning is asked again).
- `keep` / `take`: VenvContents read when the venv operation executes is offered to the packages operation after
  it, when the first changed nothing.
Kept in the run's memory (roles/run_memory.py) per host.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, StringCommand
from pyinfra.context import ctx_state

from roles.run_memory import memory_of


@dataclass(frozen=True)
class Ask:
    """One question for a host: a pyinfra fact class and its arguments."""

    fact: type
    kwargs: dict = field(default_factory=dict)

    @classmethod
    def of(cls, fact, **kwargs) -> Ask:
        return cls(fact, kwargs)

    def key(self) -> tuple:
        return self.fact.__name__, _frozen(self.kwargs)


def _frozen(value: Any) -> Any:
    """Arguments as a hashable value: the same question asked with a list or a tuple is the same question."""
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, set | frozenset):
        return tuple(sorted(_frozen(item) for item in value))
    return value


def _batchable(ask: Ask) -> bool:
    """Whether the fact can ride in the one command: a plain FactBase run by the login shell, with no command it
    requires first and no precondition (pyinfra handles those when it is asked alone)."""
    if not (isinstance(ask.fact, type) and issubclass(ask.fact, FactBase)) or ask.fact.shell_executable:
        return False
    fact = ask.fact()
    return fact.requires_command(**ask.kwargs) is None and fact.check_preconditions(ctx_state.get(), host) is None


# Where a batch's answers wait to be printed: /run, root's own tmpfs — not /tmp, which every account can fill (a
# full file system could cut an answer short while its command still ends with status 0).
ANSWERS_DIR = "/run"


class _Batch(FactBase):
    """Several facts' commands in one, run at the same time: each in a background subshell that writes
    `TOKEN-i`, the command's output and `TOKEN-i STATUS` to its own file in a private directory (`mktemp -d` in
    ANSWERS_DIR: root's, mode 0700, an unpredictable name, removed at the end); once all have ended, the files are
    printed in order. So a host answers in the time of its slowest question, not of all of them one after another
    (on a workstation each runs on a core of its own). STATUS comes from the subshell's EXIT trap: an `exit N` in a
    command is its status, as in `( command )`. Where no private directory can be made, nothing runs and each fact is
    asked alone. The output is split in `split`, not here (pyinfra calls `process` with the stdout lines)."""

    def command(self, token: str, commands: list) -> StringCommand:
        # Exit status 0 whatever happens here: a failed _Batch would fail the host in pyinfra; an answer that is
        # missing is only asked alone.
        private = f"mktemp -d -p {shlex.quote(ANSWERS_DIR)} rocm-fleet-answers.XXXXXXXXXX"
        bits: list = [
            f"d=$({private})",
            "||",
            "exit",
            "0;",
            "trap",
            "'rm -rf -- \"$d\"'",
            "EXIT;",
            "trap",
            "'exit 129'",
            "HUP",
            "INT",
            "TERM;",
        ]
        for index, command in enumerate(commands):
            bits += [
                "(",
                "exec",
                f'>"$d/{index}";',
                "trap",
                f"'echo \"{token}-{index} $?\"'",
                "EXIT;",
                "echo",
                f"{token}-{index};",
                command,
                ")",
                "&",
            ]
        bits += ["wait;", "cat", "--", *(f'"$d/{index}"' for index in range(len(commands))), "||", "true"]
        return StringCommand(*bits)

    def process(self, output) -> list[str]:
        return list(output)


def split(lines: list[str], token: str, count: int) -> dict[int, list[str]]:
    """{index: the stdout lines of command `index`} for each command that ended with exit status 0. A command whose
    end line never came (its shell died, or it set an EXIT trap of its own) is not an answer; the next start line
    begins the next answer all the same."""
    answers: dict[int, list[str]] = {}
    index, body = None, []
    for line in lines:
        started = line[len(token) + 1 :] if line.startswith(f"{token}-") else ""
        if started.isdigit():
            index, body = int(started), []
            continue
        if index is None:
            continue
        if line == f"{token}-{index} 0":
            if 0 <= index < count:
                answers[index] = body
            index = None
        elif line.startswith(f"{token}-{index} "):
            index = None  # it failed: asked alone when read
        else:
            body.append(line)
    return answers


def _answered(ask: Ask, lines: list[str]) -> tuple[bool, Any]:
    """(True, value) as pyinfra's get_fact would give it for these stdout lines; (False, None) when `process`
    rejects them — then the fact is asked alone, and pyinfra reports the error."""
    fact = ask.fact()
    if not lines:
        return True, fact.default()
    try:
        return True, fact.process(lines)
    except Exception:  # noqa: BLE001 - any failure: leave it to pyinfra's own get_fact and its error handling
        return False, None


_TRIED = ("tried",)  # in a host's read-ahead answers: the keys already sent in a batch, answered or not


def _host_reads() -> dict:
    return memory_of(ctx_state.get()).read_ahead.setdefault(host.name, {})


def read_ahead(asks: Iterable[Ask]) -> None:
    """Ask the current host, in one command, every fact in `asks` not read ahead yet (see the module docstring)."""
    known = _host_reads()
    tried = known.setdefault(_TRIED, set())
    todo: dict[tuple, Ask] = {}
    for ask in asks:
        if ask.key() not in tried and _batchable(ask):
            todo.setdefault(ask.key(), ask)
    if not todo or _changed_since_start():
        return
    tried.update(todo)  # one try each: a fact the batch could not answer is asked alone when read, not batched again
    token = f"rocm-fleet-{secrets.token_hex(16)}"
    ordered = list(todo.values())
    commands = [ask.fact().command(**ask.kwargs) for ask in ordered]
    lines = host.get_fact(_Batch, token=token, commands=commands)
    for index, body in split(lines or [], token, len(ordered)).items():
        ok, value = _answered(ordered[index], body)
        if ok:
            known[ordered[index].key()] = value


def _changed_since_start() -> bool:
    """Whether an operation of this run has run a command on the current host (then read-ahead answers are stale)."""
    state = ctx_state.get()
    return any(
        data.operation_meta.executed for data in state.ops.get(host, {}).values() if data.operation_meta.is_complete()
    )


def ask(fact_cls, **kwargs):
    """host.get_fact(fact_cls, **kwargs) — answered from the read-ahead while the run has changed nothing here."""
    known = _host_reads()
    key = Ask(fact_cls, kwargs).key()
    if key in known and not _changed_since_start():
        return known[key]
    return host.get_fact(fact_cls, **kwargs)


def _key(fact_cls, kwargs: dict[str, Any], across_execution: bool) -> tuple:
    phase = "run" if across_execution else ("execute" if ctx_state.get().is_executing else "plan")
    return host.name, *Ask(fact_cls, kwargs).key(), phase


def read(fact_cls, *, across_execution: bool = False, **kwargs):
    """ask(fact_cls, **kwargs), asked of the host once per run (and phase, unless across_execution)."""
    reads = memory_of(ctx_state.get()).fact_reads
    key = _key(fact_cls, kwargs, across_execution)
    if key not in reads:
        reads[key] = ask(fact_cls, **kwargs)
    return reads[key]


def keep(fact_cls, value, **kwargs) -> None:
    """Offer `value`, just read and still true (the caller changed nothing), to the next `take` of this phase."""
    memory_of(ctx_state.get()).fact_reads[_key(fact_cls, kwargs, False)] = value


def take(fact_cls, **kwargs):
    """The value kept for this fact in this phase (once), or ask(fact_cls, **kwargs)."""
    reads = memory_of(ctx_state.get()).fact_reads
    key = _key(fact_cls, kwargs, False)
    if key in reads:
        return reads.pop(key)
    return ask(fact_cls, **kwargs)
