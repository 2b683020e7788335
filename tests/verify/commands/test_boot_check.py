"""`verify boot-check`: the full check once per boot, its result kept for the controller — run for real on stand-in
images (tests/support/standin_rocm.py; --root makes it the static part), with this machine's own boot id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.standin_rocm import SITE, StandinImage
from tests.support.verify_runs import run_check_root
from verify.commands.boot_check import boot_id, wait_for_driver

REPO = Path(__file__).resolve().parents[3]
PREFIX = "rocm-fleet boot check:"


def boot_check(root: Path, state: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "boot-check",
            "--venv",
            "/opt/rocm-fleet/venv",
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--root",
            str(root),
            "--state-dir",
            str(state),
            "--driver-wait",
            "0",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_once_per_boot_then_again_after_a_new_boot(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch(bundled_sonames="upstream")
    image.bitsandbytes()
    image.system_rocm()
    state = tmp_path / "state"
    first = boot_check(image.root, state)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.startswith(f"{PREFIX} ") and ": PASS — all " in first.stdout
    kept = json.loads((state / "last.json").read_text())
    assert kept["kind"] == "rocm-fleet.boot-check-result" and kept["boot_id"] == boot_id()
    assert kept["previous_kernel"] is None and kept["report"]["verdict"] == "pass"

    again = boot_check(image.root, state)
    assert again.returncode == 0 and again.stdout.startswith(f"{PREFIX} already checked this boot (")

    # A result of another boot (what the next boot finds): checked again, the kernel it came from kept.
    kept.update(boot_id="an-earlier-boot", kernel="6.8.0-49-generic")
    (state / "last.json").write_text(json.dumps(kept))
    # Something lost since: now the check fails, and the unit's exit status says so.
    image.path(f"{SITE}/bitsandbytes/libbitsandbytes_rocm72.so").unlink()
    after = boot_check(image.root, state)
    assert after.returncode == 1
    assert "(after 6.8.0-49-generic): FAIL — linkage.static: bitsandbytes would fail" in after.stdout
    assert json.loads((state / "last.json").read_text())["previous_kernel"] == "6.8.0-49-generic"


def test_verify_check_carries_the_last_boot_result_into_its_report(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch(bundled_sonames="upstream")
    image.bitsandbytes()
    image.system_rocm()
    state = image.path("/var/lib/rocm-fleet/boot-check")
    assert boot_check(image.root, state).returncode == 0
    report, _ = run_check_root(image.root)
    facts = report["facts"]["boot_check"]
    assert facts["boot_id"] == boot_id() and facts["verdict"] == "pass"
    (state / "last.json").write_text("{not json")  # unusable: no boot facts, and the check still reports
    report, _ = run_check_root(image.root)
    assert report["facts"]["boot_check"] is None


def test_waiting_for_the_driver_is_waiting_for_dev_kfd_not_for_seconds(tmp_path):
    kfd = tmp_path / "kfd"
    now = [0.0]

    def pause(seconds):  # a fake clock: the "driver" appears after 3 s of polling
        now[0] += seconds
        if now[0] >= 3:
            kfd.touch()

    assert wait_for_driver(120, str(kfd), gpus=lambda: ["a GPU"], clock=lambda: now[0], pause=pause)
    assert now[0] == 3.0
    kfd.unlink()
    now[0] = 0.0
    assert not wait_for_driver(120, str(kfd), gpus=lambda: [], clock=lambda: now[0], pause=pause)  # no AMD GPU on PCI
    assert now[0] == 0.0
    assert not wait_for_driver(
        2,
        str(tmp_path / "never"),
        gpus=lambda: ["a GPU"],
        clock=lambda: now[0],
        pause=lambda s: now.__setitem__(0, now[0] + s),
    )


def test_the_boot_check_refreshes_the_metrics_from_every_result_kept_beside_it(tmp_path):
    """`--metrics-dir` (the unit passes node_exporter's directory, as the verification stage does): after keeping its
    result the boot check rewrites rocm_fleet.prom from the results beside its state directory — its own series and
    an earlier verification's — and a directory it cannot write is one more line, not a failed check."""
    image = StandinImage(tmp_path / "image")
    image.torch(bundled_sonames="upstream")
    image.bitsandbytes()
    image.system_rocm()
    kept = tmp_path / "rocm-fleet"
    state, metrics = kept / "boot-check", tmp_path / "node-exporter"
    metrics.mkdir()
    report, _ = run_check_root(image.root)
    kept.mkdir()
    (kept / "last-verify.json").write_text(json.dumps(report))
    done = boot_check(image.root, state, "--metrics-dir", str(metrics))
    assert done.returncode == 0, done.stdout + done.stderr
    text = (metrics / "rocm_fleet.prom").read_text()
    assert 'rocm_fleet_passed{source="boot_check"} 1' in text
    assert 'rocm_fleet_result_usable{source="verification"} 1' in text
    # A directory where the file belongs (nothing can replace it): one line in the journal, the verdict unchanged.
    (metrics / "rocm_fleet.prom").unlink()
    (metrics / "rocm_fleet.prom").mkdir()
    (metrics / "rocm_fleet.prom" / "x").touch()
    blocked = boot_check(image.root, state, "--metrics-dir", str(metrics), "--force")
    assert blocked.returncode == 0, blocked.stdout + blocked.stderr
    assert f"{PREFIX} could not write {metrics}/rocm_fleet.prom (" in blocked.stdout
    # No node_exporter on the host (its directory absent): no file and no line.
    quiet = boot_check(image.root, state, "--metrics-dir", str(tmp_path / "absent"), "--force")
    assert quiet.returncode == 0 and "could not write" not in quiet.stdout and not (tmp_path / "absent").exists()
