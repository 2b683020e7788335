"""roles/run_reads.py: a fact read once per run and host where nothing in between can change it — and read again
where something can (the other phase, another host, another run, a venv operation that changed the venv).

For run-level memory the host is the stand-in of tests/support (facts from JSON output, every ask recorded in
`asked`); the read-ahead runs real commands on this machine through pyinfra's @local connector, compared with the
same facts asked alone. A real no-op re-deploy's commands per host are counted in tests/e2e/test_deploy.py and
bench/fleet_scale.py (bench/run_probe.py)."""

from __future__ import annotations

import json
import os

import pytest
from pyinfra.api import Config, FactBase, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.operation import add_op
from pyinfra.api.operations import run_ops
from pyinfra.context import ctx_host, ctx_state
from pyinfra.operations import server

from roles import run_reads
from roles.debian.facts import OsReleaseFile, VenvPathAccess
from roles.preflight.facts import ExistingUsers
from roles.uploads import FileNames, FilesSha256
from roles.venv import operations
from roles.venv.facts import HostPython3, VenvContents
from tests.support.operation_cases import OutputHost, render

VENV = "/opt/rocm-fleet/venv"
PYTHON = ["Python 3.11.2", "glibc 2.36", "x86_64"]  # what HostPython3's command prints
FULL_VENV = json.dumps(
    {
        "owner": "alice",
        "python": "3.11.2",
        "packages": {"torch": "2.13.0+rocm7.2", "bitsandbytes": "0.50.1"},
        "foreign": None,
        "broken": None,
    }
)
ACCESS = [
    "owner 1001",
    "resolved /opt/rocm-fleet",
    "dir 0 0 41ed root root /",
    "dir 0 0 41ed root root /opt",
    "dir 0 0 41ed root root /opt/rocm-fleet",
    "group root:x:0:",
    "primary 0 root",
]


def asks(host, fact_cls) -> int:
    return host.asked.count(fact_cls.__name__)


def in_context(host, function, *args, **kwargs):
    with ctx_state.use(host.state), ctx_host.use(host):
        return function(*args, **kwargs)


def venv_operations(host) -> list[str]:
    """The venv stage's two venv operations, in their order, as one phase of a run runs their bodies."""
    commands = []
    for operation, arguments in (
        (operations.venv_directory, {"path": VENV, "owner": "alice"}),
        (
            operations.venv_packages,
            {
                "path": VENV,
                "owner": "alice",
                "torch_spec": "torch==2.13.0+rocm7.2",
                "other_requirements": ["bitsandbytes==0.50.1"],
                "wheelhouse": "/wh",
            },
        ),
    ):
        commands += in_context(
            host, lambda op=operation, kw=arguments: [render(command) for command in op._inner(**kw)]
        )
    return commands


def test_a_fact_read_twice_while_planning_is_asked_of_the_host_once():
    # Preflight and the venv stage both judge the venv's path while the deploy files load: nothing has run yet.
    host = OutputHost({"VenvPathAccess": ACCESS})
    first = in_context(host, run_reads.read, VenvPathAccess, path=VENV, owner="alice")
    second = in_context(host, run_reads.read, VenvPathAccess, path=VENV, owner="alice")
    assert second is first
    assert asks(host, VenvPathAccess) == 1


def test_other_arguments_another_phase_or_another_run_ask_again():
    host = OutputHost({"VenvPathAccess": ACCESS})
    in_context(host, run_reads.read, VenvPathAccess, path=VENV, owner="alice")
    in_context(host, run_reads.read, VenvPathAccess, path=VENV, owner="bob")
    assert asks(host, VenvPathAccess) == 2
    host.state.is_executing = True  # what was read while planning may have changed since: operations ran
    in_context(host, run_reads.read, VenvPathAccess, path=VENV, owner="alice")
    assert asks(host, VenvPathAccess) == 3
    other_run = OutputHost({"VenvPathAccess": ACCESS})  # the same host name, in another State (pytest runs many)
    in_context(other_run, run_reads.read, VenvPathAccess, path=VENV, owner="alice")
    assert asks(other_run, VenvPathAccess) == 1


def test_each_host_has_its_own_reads():
    first = OutputHost({"HostPython3": PYTHON}, name="ws1")
    second = OutputHost({"HostPython3": PYTHON}, name="ws2")
    second.state = first.state  # one run, two hosts
    in_context(first, run_reads.read, HostPython3)
    in_context(second, run_reads.read, HostPython3)
    assert (asks(first, HostPython3), asks(second, HostPython3)) == (1, 1)


def test_across_execution_the_planning_read_is_used_when_the_operation_runs():
    host = OutputHost({"HostPython3": PYTHON})
    planned = in_context(host, run_reads.read, HostPython3, across_execution=True)
    host.state.is_executing = True
    assert in_context(host, run_reads.read, HostPython3, across_execution=True) is planned
    assert asks(host, HostPython3) == 1


def test_a_kept_value_is_taken_once_in_its_own_phase():
    host = OutputHost({"VenvContents": [FULL_VENV]})
    in_context(host, run_reads.keep, VenvContents, "kept", path=VENV, owner="alice")
    host.state.is_executing = True
    assert in_context(host, run_reads.take, VenvContents, path=VENV, owner="alice") != "kept"  # not across phases
    host.state.is_executing = False
    assert in_context(host, run_reads.take, VenvContents, path=VENV, owner="alice") == "kept"
    assert in_context(host, run_reads.take, VenvContents, path=VENV, owner="alice") != "kept"  # only once
    assert asks(host, VenvContents) == 2


def test_a_provisioned_venv_is_read_once_per_phase_by_the_two_venv_operations():
    host = OutputHost({"VenvContents": [FULL_VENV], "HostPython3": PYTHON})
    assert venv_operations(host) == []
    host.state.is_executing = True
    assert venv_operations(host) == []
    # VenvContents walks every file of the venv (~25,000 with torch): once while planning, once when executing.
    assert asks(host, VenvContents) == 2
    assert asks(host, HostPython3) == 1


def test_a_venv_the_first_operation_changes_is_read_again_by_the_second():
    # Made by another Python: venv_directory recreates it, so what it read is no longer what venv_packages will find.
    other_python = FULL_VENV.replace('"3.11.2"', '"3.10.12"')
    host = OutputHost({"VenvContents": [other_python], "HostPython3": PYTHON, "VenvPathAccess": ACCESS})
    commands = venv_operations(host)
    assert "--clear" in commands[0]
    assert asks(host, VenvContents) == 2


def test_a_host_without_python3_when_planning_is_asked_again_when_the_operation_runs():
    # python3-venv (installed between the two) brings python3: a missing one read while planning is not trusted.
    host = OutputHost({"HostPython3": []})
    assert in_context(host, run_reads.read, HostPython3, across_execution=True) is None
    host.state.is_executing = True
    host.facts["HostPython3"] = PYTHON
    host.facts["VenvContents"] = []
    host.facts["VenvPathAccess"] = ACCESS
    in_context(host, lambda: list(operations.venv_directory._inner(path=VENV, owner="alice")))
    assert asks(host, HostPython3) == 2


# Read-ahead: several facts in one command per host.

TOKEN = "rocm-fleet-" + "ab" * 16


def test_split_keeps_only_the_answers_that_ended_with_exit_status_0_under_this_runs_token():
    lines = [
        f"{TOKEN}-0",
        "a",
        "rocm-fleet-" + "cd" * 16 + "-1 0",
        f"{TOKEN}-0 0",  # another token is a plain line
        f"{TOKEN}-1",
        "half",
        f"{TOKEN}-1 2",  # failed: asked alone later
        f"{TOKEN}-2",
        f"{TOKEN}-2 0",  # no output: the fact's default
        f"{TOKEN}-3",
        "never ended",
    ]
    assert run_reads.split(lines, TOKEN, 4) == {0: ["a", "rocm-fleet-" + "cd" * 16 + "-1 0"], 2: []}


def test_an_answer_whose_end_never_came_is_dropped_and_the_next_start_line_begins_the_next():
    lines = [f"{TOKEN}-0", "a", f"{TOKEN}-1", "b", f"{TOKEN}-1 0", f"{TOKEN}-2", "c", f"{TOKEN}-2 0"]
    assert run_reads.split(lines, TOKEN, 3) == {1: ["b"], 2: ["c"]}


def test_an_answer_for_a_question_not_asked_is_dropped():
    assert run_reads.split([f"{TOKEN}-7", "x", f"{TOKEN}-7 0"], TOKEN, 2) == {}


class _Fails(FactBase):
    def command(self) -> str:
        return "echo partial; exit 3"

    def process(self, output):
        return output


@pytest.fixture
def local_host():
    """This machine through pyinfra's @local connector: real commands, read-only facts."""
    inventory = Inventory((["@local"], {}))
    state = State(inventory, Config())
    connect_all(state)
    host = inventory.get_host("@local")
    asked = []
    real = host.get_fact

    def counted(fact_cls, *args, **kwargs):
        asked.append(fact_cls.__name__)
        return real(fact_cls, *args, **kwargs)

    host.get_fact = counted  # the test counts what goes to the host; the facts are pyinfra's real get_fact
    yield state, host, asked


# Answers that do not move while the test runs (free space does: the machine is shared).
QUESTIONS = [
    (OsReleaseFile, {}),
    (FilesSha256, {"directory": "/etc", "names": ["hostname", "passwd", "absent"]}),
    (ExistingUsers, {"users": ["root", "no-such-account"]}),
    (FileNames, {"directory": "/etc/apt"}),
    (FileNames, {"directory": "/nonexistent"}),
]


def test_facts_read_ahead_in_one_command_answer_as_each_asked_alone(local_host):
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead(run_reads.Ask.of(fact, **kwargs) for fact, kwargs in QUESTIONS)
        assert asked == ["_Batch"]
        ahead = [run_reads.ask(fact, **kwargs) for fact, kwargs in QUESTIONS]
        assert asked == ["_Batch"]  # every answer from the one command
        alone = [host.get_fact(fact, **kwargs) for fact, kwargs in QUESTIONS]
    assert ahead == alone
    assert ahead[2] == frozenset({"root"}) and ahead[4] == []


def test_a_fact_that_fails_in_the_batch_is_asked_alone_once_and_not_batched_again(local_host):
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead([run_reads.Ask.of(_Fails), run_reads.Ask.of(OsReleaseFile)])
        run_reads.read_ahead([run_reads.Ask.of(_Fails)])
        assert asked == ["_Batch"]
        run_reads.ask(OsReleaseFile)
        assert asked == ["_Batch"]
        with pytest.raises(PyinfraError, match="No hosts remaining"):
            run_reads.ask(_Fails)  # pyinfra's own get_fact: it fails the host, as without a read-ahead
        assert asked == ["_Batch", "_Fails"]


class _WaitsForTheNext(FactBase):
    """Answers only once the question after it in the batch has run: it reads a FIFO that one writes."""

    def command(self, fifo: str) -> str:
        return f"timeout 120 cat {fifo}"

    def process(self, output):
        return list(output)


class _WritesForThePrevious(FactBase):
    def command(self, fifo: str) -> str:
        return f"timeout 120 sh -c 'echo from-the-next > {fifo}' && echo written"

    def process(self, output):
        return list(output)


def test_the_questions_of_one_command_run_at_the_same_time(local_host, tmp_path):
    """One after another, the first would wait for the second until its `timeout` and fail: a host would answer in
    the time of all its questions, not of its slowest."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead(
            [
                run_reads.Ask.of(_WaitsForTheNext, fifo=str(fifo)),
                run_reads.Ask.of(_WritesForThePrevious, fifo=str(fifo)),
            ]
        )
        assert run_reads.ask(_WaitsForTheNext, fifo=str(fifo)) == ["from-the-next"]
        assert run_reads.ask(_WritesForThePrevious, fifo=str(fifo)) == ["written"]
    assert asked == ["_Batch"]


class _Script(FactBase):
    def command(self, script: str) -> str:
        return script

    def process(self, output):
        return list(output)


def test_each_answer_is_its_own_commands_exit_status_and_output_and_the_private_directory_goes(
    local_host, tmp_path, monkeypatch
):
    monkeypatch.setattr(run_reads, "ANSWERS_DIR", str(tmp_path))  # where mktemp makes the batch's directory
    scripts = {
        "exit 0 after output": "echo fine; exit 0",
        "exit 3": "echo partial; exit 3",
        "its own EXIT trap": "trap 'echo bye' EXIT; echo hi",
        "ends in ;": "echo semi;",
        "cd and a variable": 'cd / && x=1 && echo "$x $(pwd)"',
        "no output": "true",
    }
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead([run_reads.Ask.of(_Script, script=script) for script in scripts.values()])
        assert list(tmp_path.iterdir()) == []  # removed once printed
        known = run_reads._host_reads()
        answered = {
            name: known.get(run_reads.Ask.of(_Script, script=script).key(), "asked alone")
            for name, script in scripts.items()
        }
    assert answered == {
        "exit 0 after output": ["fine"],
        "exit 3": "asked alone",
        # its trap took the place of the one that writes the end line: no end, no answer
        "its own EXIT trap": "asked alone",
        "ends in ;": ["semi"],
        "cd and a variable": ["1 /"],
        "no output": None,
    }  # no output: the fact's default, as pyinfra gives it
    assert asked == ["_Batch"]


def test_where_no_private_directory_can_be_made_every_question_is_asked_alone_and_the_host_goes_on(
    local_host, monkeypatch
):
    monkeypatch.setattr(run_reads, "ANSWERS_DIR", "/nonexistent/run")
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead(run_reads.Ask.of(fact, **kwargs) for fact, kwargs in QUESTIONS)
        ahead = [run_reads.ask(fact, **kwargs) for fact, kwargs in QUESTIONS]
        alone = [host.get_fact(fact, **kwargs) for fact, kwargs in QUESTIONS]
    assert ahead == alone
    assert asked == ["_Batch"] + [fact.__name__ for fact, _ in QUESTIONS] * 2


def test_once_an_operation_ran_a_command_on_the_host_every_answer_is_asked_again(local_host):
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead([run_reads.Ask.of(OsReleaseFile)])
        run_reads.ask(OsReleaseFile)
        assert asked == ["_Batch"]
    add_op(state, server.shell, name="a change", commands=["true"])
    run_ops(state)
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.ask(OsReleaseFile)
        assert asked == ["_Batch", "OsReleaseFile"]
        run_reads.read_ahead([run_reads.Ask.of(FileNames, directory="/etc")])  # stale at once: not even sent
        assert asked == ["_Batch", "OsReleaseFile"]


def test_an_operation_that_changed_nothing_keeps_the_answers(local_host):
    state, host, asked = local_host
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.read_ahead([run_reads.Ask.of(OsReleaseFile)])
    add_op(state, server.shell, name="nothing", commands=[])
    run_ops(state)
    with ctx_state.use(state), ctx_host.use(host):
        run_reads.ask(OsReleaseFile)
    assert asked == ["_Batch"]
