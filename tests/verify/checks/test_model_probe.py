"""verify/checks/model_probe.py without torch: its time limit, with the system python3 (the probe's top level is
standard library only). The probe with the real libraries is tested in test_model.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[3] / "verify" / "checks" / "model_probe.py"

# The probe's own main() with its run() replaced by a library that catches everything the alarm raises.
DRIVER = r"""
import sys, time
probe = {"__name__": "model_probe"}
exec(compile(sys.stdin.read(), "model_probe.py", "exec"), probe)
how = sys.argv[1]

def library_that_catches_everything(args, result, workdir, device_factory):
    try:
        time.sleep(60)
    except BaseException:
        if how == "converts":
            raise RuntimeError("a library turned it into this")
    result["after"] = "carried on"

probe["run"] = library_that_catches_everything
sys.exit(probe["main"](["--time-limit", "0.2"]))
"""


@pytest.mark.parametrize(
    ("how", "reported"),
    [
        (
            "converts",
            "TimeLimitReached: the probe's time limit of 0.2 s ran out (then RuntimeError: a library turned it "
            "into this)",
        ),
        ("swallows", "TimeLimitReached: the probe's time limit of 0.2 s ran out"),
    ],
)
def test_the_time_limit_is_named_even_when_a_library_catches_its_exception(how, reported):
    done = subprocess.run(
        ["/usr/bin/python3", "-B", "-c", DRIVER, how],
        input=PROBE.read_text(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert report["errors"]["probe"] == reported
    assert not Path(report["workdir"]).exists()
