"""roles/verification/fleet.py's VerdictHistory: the last verdicts of every host, one small file for the fleet."""

from __future__ import annotations

import json
import logging

from roles.verification.fleet import HISTORY_FILE, HISTORY_KEEP, VerdictHistory


def test_each_run_adds_one_entry_per_host_and_the_oldest_go(tmp_path):
    for run in range(HISTORY_KEEP + 3):
        VerdictHistory(tmp_path).record(
            f"run{run}", {"ws1": ("PASS" if run % 2 else "FAIL", f"t{run}"), "ws2": ("UNREACHABLE", f"t{run}")}
        )
    history = VerdictHistory(tmp_path)
    assert len(history.of("ws1")) == HISTORY_KEEP
    assert history.of("ws1")[0] == ("PASS", "t3") and history.of("ws1")[-1] == ("FAIL", f"t{HISTORY_KEEP + 2}")
    assert history.of("ws9") == ()
    assert [p.name for p in tmp_path.iterdir()] == [HISTORY_FILE]  # written in place, no temporary file left


def test_the_same_run_is_recorded_once(tmp_path):
    history = VerdictHistory(tmp_path)
    history.record("run1", {"ws1": ("FAIL", "t1")})
    history.record("run1", {"ws1": ("PASS", "t2")})  # pyinfra disconnected every host twice: the last write wins
    assert VerdictHistory(tmp_path).of("ws1") == (("PASS", "t2"),)


def test_a_file_it_cannot_read_starts_again_with_a_warning(tmp_path, caplog):
    (tmp_path / HISTORY_FILE).write_text("{cut off")
    with caplog.at_level(logging.WARNING, logger="pyinfra.rocm_fleet.verification"):
        history = VerdictHistory(tmp_path)
    assert history.of("ws1") == () and "cannot be read" in caplog.text
    (tmp_path / HISTORY_FILE).write_text(
        json.dumps(
            {
                "kind": "rocm-fleet.verdict-history",
                "version": 1,
                "hosts": {"ws1": [{"verdict": 3}, {"verdict": "PASS", "at": "t"}]},
            }
        )
    )
    assert VerdictHistory(tmp_path).of("ws1") == (("PASS", "t"),)  # entries of another shape are left out
