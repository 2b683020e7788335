"""roles/stage.py: the @stage decorator, planned by real pyinfra (its API, a host on the @fake connector: the stages
here are only planned, nothing is executed)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy

from roles.settings import HostSettings
from roles.stage import SKIPPED, note, stage, stop


def planned(host_name: str, *deploys) -> list[str]:
    """Add each deploy to a fresh run on one host, in order; the names of the operations planned.

    One host per run: in API mode pyinfra matches the operations of different hosts by their position alone."""
    inventory = Inventory(([host_name], {"venv_owner": "maria"}))
    state = State(inventory, Config())
    connect_all(state)
    for deploy_function in deploys:
        add_deploy(state, deploy_function)
    return [", ".join(sorted(state.get_op_meta(op_hash).names)) for op_hash in state.get_op_order()]


def test_the_stage_gets_the_hosts_validated_settings_and_names_its_operations():
    seen: list[HostSettings] = []

    @stage("Example")
    def example(settings: HostSettings) -> None:
        seen.append(settings)
        note("fine")

    assert planned("@fake/ws1", example) == ["Example | fine"]
    assert [(s.host, s.venv_owner, s.rocm_release) for s in seen] == [("@fake/ws1", "maria", "7.2.4")]
    assert example.__name__ == "example"


@stage("First")
def first(settings: HostSettings) -> None:
    if settings.host == "@fake/unfit":
        stop("unfit", "first: this host is unfit")


def test_a_host_an_earlier_stage_stopped_gets_one_note_and_nothing_else():
    ran_on: list[str] = []
    every: list[str] = []

    @stage("Later", every_host=lambda settings: every.append(settings.host))
    def later(settings: HostSettings) -> None:
        ran_on.append(host.name)
        note("did its work")

    assert planned("@fake/unfit", first, later) == ["First | stop: unfit", f"Later | {SKIPPED}"]
    assert planned("@fake/fit", first, later) == ["Later | did its work"]
    assert ran_on == ["@fake/fit"]
    assert every == ["@fake/unfit", "@fake/fit"]  # every_host runs on the skipped host too


def test_what_a_run_stopped_stays_in_that_run():
    @stage("Later")
    def later(settings: HostSettings) -> None:
        note("did its work")

    assert planned("@fake/unfit", first, later) == ["First | stop: unfit", f"Later | {SKIPPED}"]
    # A new run (a new State) of the same host starts with an empty memory: nothing is stopped in it yet.
    assert planned("@fake/unfit", later) == ["Later | did its work"]
