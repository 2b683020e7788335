"""localfleet/state.py: the state file round-trips, and a damaged one reads as "no state" (teardown copes)."""

from localfleet.procs import ProcessId
from localfleet.state import FleetState, HostState, load_state, save_state


def test_state_round_trips_and_hosts_stay_in_numeric_order(tmp_path):
    state = FleetState("f1", str(tmp_path), "/base", "root", ProcessId(123, 456))
    for n in (10, 2, 1):
        state = state.with_host(HostState(f"ws{n}", 40000 + n, f"/r/ws{n}", "ssh-ed25519 AAAA root@x"))
    state = state.with_host(HostState("ws2", 40102, "/r/ws2", "k", ProcessId(7, 8)))  # replaces ws2
    save_state(tmp_path, state)
    loaded = load_state(tmp_path)
    assert loaded == state
    assert [h.name for h in loaded.hosts] == ["ws1", "ws2", "ws10"]
    assert loaded.hosts[1].sshd == ProcessId(7, 8) and loaded.hosts[1].port == 40102
    assert list(tmp_path.iterdir()) == [tmp_path / "state.json"]  # no temporary file left


def test_missing_or_damaged_state_reads_as_none(tmp_path):
    assert load_state(tmp_path) is None
    (tmp_path / "state.json").write_text('{"version": 1, "name": "f1", "direc')  # cut short by a killed writer
    assert load_state(tmp_path) is None
    (tmp_path / "state.json").write_text('{"version": 1}')
    assert load_state(tmp_path) is None
