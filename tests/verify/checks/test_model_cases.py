"""verify/checks/model.judge_model on probe data: one JSON case per file in data/model/ — the probe's output in, the
checks out (id, status, the exact one-line reason). Three are real probe runs on this machine's CPU (capture.py); the
GPU, checkpoint and broken-run cases are written from them by hand (no GPU and no 13B checkpoint here) and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify.checks.model import ModelExpectations, judge_model
from verify.checks.runtime import ProbeRun

CASES = sorted((Path(__file__).parent / "data" / "model").glob("*.json"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path):
    case = json.loads(path.read_text())
    assert case["description"] and case["checks"], f"{path.name}: a case says what it is and what it expects"
    want = ModelExpectations(**case["expect"])
    probe = case["probe"]
    run = ProbeRun(probe, 0) if probe is not None else ProbeRun(None, -1, (), case["probe_error"])
    got = [{"id": c.id, "status": c.status, "reason": c.reason} for c in judge_model(run, want)]
    assert got == case["checks"]
    for check in judge_model(run, want):
        json.dumps(check.evidence)  # the evidence goes into the JSON report as it is


def test_every_status_is_covered():
    statuses = {c["status"] for p in CASES for c in json.loads(p.read_text())["checks"]}
    assert statuses == {"pass", "warn", "fail"}
