"""verify/commands/check.py: `python -m verify check` — exit codes, text output, usage errors."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from tests.support.hostile_files import fifo_readers, plant
from tests.support.installed_verifier import install
from tests.support.standin_rocm import SITE, VENV, StandinImage
from tests.support.venvs import REPO
from tests.support.verify_runs import cached_check, torch_cpu_venv
from tests.verify.ld.test_elf import _sparse
from verify.checks.host import CheckOptions
from verify.commands.check import run_checks
from verify.report.report import STATIC_CHECK_IDS, judge_report, load_schema


def verify(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verify", "check", *arguments], cwd=REPO, capture_output=True, text=True
    )


def test_usage_errors_exit_2_with_one_line(tmp_path):
    done = verify("--venv", str(tmp_path), "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1")
    assert done.returncode == 2
    assert (
        done.stderr.strip() == f"verify check: {tmp_path}: not a venv (no pyvenv.cfg) — pass the venv's directory, "
        "e.g. /opt/rocm-fleet/venv"
    )
    assert verify("--venv", str(tmp_path), "--expect-rocm", "7.2", "--expect-bitsandbytes", "0.50.1").returncode == 2
    assert (
        verify("--venv", "relative/venv", "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1").returncode == 2
    )
    assert (
        verify(
            "--venv", str(tmp_path), "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1", "--device", "gpu"
        ).returncode
        == 2
    )
    (tmp_path / "pyvenv.cfg").write_text("version = 3.11.2\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to("/usr/bin/python3")
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    done = verify(
        "--venv",
        str(tmp_path),
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--probe-user",
        "no-such-user",
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "verify check: --probe-user: account 'no-such-user' does not exist — pass the venv's owner (venv_owner)"
    )


def test_all_passed_exits_0_and_prints_one_line_per_check(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    done = verify(
        "--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(": PASS — all 8 checks passed")  # the kernel checks skip an image
    assert [line.split()[0] for line in lines[1:]] == ["PASS"] * 8 + ["SKIP"] * 3


@pytest.mark.slow
def test_a_failed_check_exits_1():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    assert report["verdict"] == "fail" and done.returncode == 1


@pytest.mark.slow
@pytest.mark.root
def test_the_installed_verifier_runs_the_same_checks_with_the_systems_bare_python3(tmp_path):
    """What a host runs: the installed verifier (roles/verifier.py) through its launcher, with Debian's
    /usr/bin/python3, which has no pyelftools — the version carries it, the report schema and the probe's source."""
    python3 = "/usr/bin/python3"
    if subprocess.run([python3, "-c", "import elftools"], capture_output=True).returncode == 0:
        pytest.skip("/usr/bin/python3 has pyelftools installed: it would not prove the version carries it")
    if os.geteuid() != 0:
        pytest.skip("needs root: the verifier is root's only")
    top = install(tmp_path / "verifier")
    done = subprocess.run(
        [
            python3,
            "-I",
            "-S",
            str(top / "launcher.py"),
            "check",
            "--venv",
            str(torch_cpu_venv()),
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--device",
            "cpu",
            "--no-gpu-required",
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["linkage.static"]["reason"].startswith("libhipblas.so.3 (needed by libbitsandbytes_rocm72.so)")
    assert by_id["nf4.cpu"]["status"] == "pass" and by_id["runtime.maps"]["status"] == "pass"
    assert report["host"]["python"].startswith("3.11") and report["request"]["gpu_required"] is False
    jsonschema.validate(report, load_schema())


BNB_LIBRARY = f"{SITE}/bitsandbytes/libbitsandbytes_rocm72.so"
FINDING = {
    "fifo": "is a FIFO (a named pipe: opening it would block), not a regular file",
    "chardev": "is a character device, not a regular file",
    "socket": "is a socket, not a regular file",
    "directory": "cannot read file data (it is a directory)",
    "sparse": "claims 68719476736 bytes, more than any real one (limit 1048576 bytes): corrupt or hostile, not read",
}


def provisioned(top) -> StandinImage:
    image = StandinImage(top / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    return image


@pytest.mark.parametrize("kind", FINDING)
def test_a_hostile_file_at_bitsandbytes_library_is_a_finding_of_check_root(tmp_path, kind):
    """Issue 9 findings 5 and 6: a FIFO there hung the static check (root's, after every dpkg run) for ever; a device
    node was opened and read; a sparse ELF claiming 64 GiB of dynamic section was read into memory. Now each is a
    failing linkage check naming the file, in a report that proves what it says, and nothing opens the FIFO."""
    if kind == "chardev" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    image = provisioned(tmp_path)
    target = image.path(BNB_LIBRARY)
    if kind == "sparse":
        _sparse(target.read_bytes(), target, 2, 1 << 36)
    else:
        plant(target, kind)
    with fifo_readers(target) as opened:
        done = verify(
            "--root",
            str(image.root),
            "--venv",
            VENV,
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--json",
        )
    assert opened.count == 0, "the static check opened the FIFO to read it"
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    linkage = next(c for c in report["checks"] if c["id"] == "linkage.static")
    assert linkage["status"] == "fail" and FINDING[kind] in linkage["reason"], linkage["reason"]
    assert BNB_LIBRARY in linkage["reason"]
    assert judge_report(report, exit_status=done.returncode).trustworthy


def test_a_symlink_to_dev_zero_in_an_image_stays_in_the_image(tmp_path):
    """Under --root a link is followed inside the image: the image has no /dev/zero, so the library is missing —
    the host's /dev/zero is never opened."""
    image = provisioned(tmp_path)
    plant(image.path(BNB_LIBRARY), "symlink to /dev/zero")
    done = verify(
        "--root", str(image.root), "--venv", VENV, "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1", "--json"
    )
    linkage = next(c for c in json.loads(done.stdout)["checks"] if c["id"] == "linkage.static")
    assert done.returncode == 1 and linkage["status"] == "fail", linkage


def test_the_static_part_out_of_time_is_a_failing_check_not_a_hang(tmp_path):
    """A deadline of 0 s has passed before the first file is opened, on any machine: every static check fails with
    what it stopped at, the runtime probe is not started, and the report still proves what it says."""
    image = provisioned(tmp_path)
    report = run_checks(
        CheckOptions(
            venv=Path(VENV),
            expect_rocm="7.2.4",
            expect_bitsandbytes="0.50.1",
            root=image.root,
            static_only=True,
            static_time_limit=0,
        )
    ).to_json()
    assert [c["id"] for c in report["checks"]] == list(STATIC_CHECK_IDS)
    for check in report["checks"]:
        assert check["status"] == "fail"
        assert check["reason"].startswith("the static check did not finish: not finished within 0 s (stopped before ")
    judged = judge_report(report)
    assert judged.trustworthy and not judged.passed


def test_the_report_is_timed_when_the_checks_start_not_when_they_end(tmp_path, monkeypatch):
    """The status compares dpkg's changes with a result's time: a change made while the checks ran (after the static
    part read dpkg's database) must come after it. A stand-in static check notes the second it read in, then the run
    goes on into the next second; the report's time is the first."""
    from verify.commands import check as check_command

    read_at = []

    class ReadsThenWaits:
        @staticmethod
        def run(host):
            read_at.append(int(time.time()))
            while int(time.time()) <= read_at[0]:  # the condition: the clock has passed into the next second
                time.sleep(0.05)
            return []

        @staticmethod
        def facts(host, results):
            return {}

    monkeypatch.setattr(check_command, "STATIC_CHECKS", (ReadsThenWaits,))
    monkeypatch.setattr(check_command, "RUNTIME_CHECKS", ())
    monkeypatch.setattr(check_command, "CHECKS", (ReadsThenWaits,))
    monkeypatch.setattr(check_command, "Facts", lambda **facts: facts)
    monkeypatch.setattr(check_command, "build_report", lambda **fields: fields)
    before = int(time.time())
    fields = run_checks(
        CheckOptions(
            venv=Path(VENV),
            expect_rocm="7.2.4",
            expect_bitsandbytes="0.50.1",
            root=provisioned(tmp_path).root,
            static_only=True,
        )
    )
    stamp = calendar.timegm(time.strptime(fields["generated_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before <= stamp <= read_at[0] < int(time.time())


def test_the_runtime_probe_is_not_started_on_a_library_that_is_not_a_regular_file(tmp_path):
    """The probe's dlopen of a FIFO would block it until its timeout (900 s). The venv here is the stand-in image's,
    used in place (root /); its bin/python is a stand-in too, so a probe that did start would fail otherwise."""
    image = provisioned(tmp_path)
    plant(image.path(BNB_LIBRARY), "fifo")
    with fifo_readers(image.path(BNB_LIBRARY)) as opened:
        report = run_checks(
            CheckOptions(
                venv=image.path(VENV),
                expect_rocm="7.2.4",
                expect_bitsandbytes="0.50.1",
                device="cpu",
                gpu_required=False,
                environ={},
            )
        ).to_json()
    assert opened.count == 0
    runtime = next(c for c in report["checks"] if c["id"] == "runtime.torch")
    assert runtime["status"] == "fail"
    assert runtime["reason"] == (
        f"runtime probe not run: {image.path(BNB_LIBRARY)}: not a regular file where the "
        "process would load a library (a FIFO would block the probe for ever) — remove it "
        "and reinstall what owns that path"
    )
    assert judge_report(report).trustworthy


SECONDS = "is not a number of seconds above 0 up to 86400"
MODEL = "is not off, synthetic or the absolute path of a checkpoint directory on this host (e.g. /srv/models/llama-13b)"


@pytest.mark.parametrize(
    "option, argument, words",
    [
        *(("--timeout", argument, SECONDS) for argument in ("nan", "inf", "-inf", "1e300", "0", "-5", "soon")),
        ("--model-timeout", "0", SECONDS),
        *(
            ("--model", argument, MODEL)
            for argument in ("models/llama-13b", "Synthetic", "/srv/models/../llama", "", "on")
        ),
    ],
)
def test_a_bad_timeout_or_model_is_one_line_and_exit_2(tmp_path, option, argument, words):
    """Issue 9 finding 10: `--timeout nan` ended in a traceback from subprocess. --model: off, synthetic or a path."""
    done = verify(
        "--venv", str(tmp_path), "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1", f"{option}={argument}"
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"python -m verify check: argument {option}: {argument!r} {words} (see python -m verify check --help)"
    ]


def test_a_model_path_that_is_no_directory_here_is_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "no-such-model"
    done = verify(
        "--venv", str(tmp_path), "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1", "--model", str(missing)
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"verify check: --model {missing}: no such directory on this host — give a checkpoint directory"
    ]


def test_a_report_that_cannot_be_written_is_one_line_and_exit_2(tmp_path):
    image = provisioned(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "verify",
                "check",
                "--root",
                str(image.root),
                "--venv",
                VENV,
                "--expect-rocm",
                "7.2.4",
                "--expect-bitsandbytes",
                "0.50.1",
                "--json",
            ],
            cwd=REPO,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["verify check: cannot write the output (No space left on device)"]


def test_keep_in_keeps_the_report_on_the_host_and_metrics_dir_writes_the_metrics_from_it(tmp_path):
    """What the verification stage asks (--keep-in /var/lib/rocm-fleet --metrics-dir …): the report kept is the
    report printed, and rocm_fleet.prom carries its verdict."""
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    kept, metrics = tmp_path / "rocm-fleet", tmp_path / "node-exporter"
    kept.mkdir()
    metrics.mkdir()
    done = verify(
        "--root",
        str(image.root),
        "--venv",
        VENV,
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--json",
        "--keep-in",
        str(kept),
        "--metrics-dir",
        str(metrics),
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads((kept / "last-verify.json").read_text()) == json.loads(done.stdout)
    assert sorted(p.name for p in kept.iterdir()) == ["last-verify.json"]  # no temporary file left
    prom = (metrics / "rocm_fleet.prom").read_text()
    assert 'rocm_fleet_passed{source="verification"} 1' in prom.splitlines()


def test_a_report_it_cannot_keep_is_a_warning_not_a_failure(tmp_path):
    image = StandinImage(tmp_path / "image")
    image.torch()
    image.bitsandbytes()
    image.system_rocm()
    done = verify(
        "--root",
        str(image.root),
        "--venv",
        VENV,
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--keep-in",
        str(tmp_path / "missing"),
    )
    assert done.returncode == 0 and done.stdout.splitlines()[0].endswith(": PASS — all 8 checks passed")
    assert done.stderr == (
        f"verify check: warning: could not keep the report in {tmp_path / 'missing'} (No such file or directory)\n"
    )
    done = verify(
        "--root",
        str(image.root),
        "--venv",
        VENV,
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--metrics-dir",
        str(tmp_path),
    )
    assert done.returncode == 2 and "--metrics-dir needs --keep-in" in done.stderr
