"""roles/verification/deploy.py and tasks/verify.py: real pyinfra runs of the verification stage.

The host is this machine through pyinfra's @local connector, with the real torch-cpu venv as the workstation's venv,
inside a private mount namespace whose /var/lib is an overlay on a tmpfs: the verifier's install lands there and
vanishes with the namespace, and the test can see exactly what the run changed on the host. A second inventory host
points at a closed loopback port (unreachable). Needs root (mount namespaces).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from roles.settings import check_data
from roles.verification.deploy import check_arguments, remote_command
from roles.verifier import REFUSED, not_installed_line, question_for, verifier_command, version
from tests.support.venvs import REPO
from tests.support.verify_runs import torch_cpu_venv

LABEL = "torch 2.13.0 CPU, stand-in for the ROCm wheel"
PYINFRA = REPO / ".venv" / "bin" / "pyinfra"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def inventory_data(venv: Path, reports: Path) -> dict:
    return {
        "venv_path": str(venv),
        "verify_device": "cpu",
        "gpu_required": False,
        "torch_label": LABEL,
        "reports_dir": str(reports),
    }


def write_inventory(path: Path, venv: Path, reports: Path) -> Path:
    data = inventory_data(venv, reports)
    path.write_text(
        "workstations = [\n"
        f"    ('@local', {data!r}),\n"
        "    ('ws-down', "
        f"{{'ssh_hostname': '127.0.0.1', 'ssh_port': {closed_port()}, 'reports_dir': {str(reports)!r}}}),\n]\n"
    )
    return path


def frozen_checkout(workdir: Path) -> Path:
    """A copy of the code the runs use: other work in a shared tree must not change verify/ (and so the verifier's
    bytes) between two runs of one test."""
    checkout = workdir / "checkout"
    for part in ("verify", "roles", "tasks"):
        shutil.copytree(REPO / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    return checkout


def run_isolated(runs: list[list[str]], workdir: Path) -> tuple[list[tuple[int, str, str]], list[str], str]:
    """Run each pyinfra argv (from a frozen checkout) in one private mount namespace with /var/lib overlaid on a
    tmpfs; return each run's (exit code, stdout, stderr), the paths the runs created or changed under /var/lib, and
    the installed verifier's MANIFEST."""
    checkout = frozen_checkout(workdir)
    scratch = Path(tempfile.mkdtemp(prefix="verify-ns-", dir=workdir))
    lines = [
        "set -e",
        f"mount -t tmpfs tmpfs {scratch}",
        f"mkdir {scratch}/upper {scratch}/work",
        f"mount -t overlay overlay -o lowerdir=/var/lib,upperdir={scratch}/upper,workdir={scratch}/work /var/lib",
        "set +e",
    ]
    for index, argv in enumerate(runs):
        out = workdir / f"run{index}"
        lines.append(f"{shlex.join(argv)} > {out}.out 2> {out}.err; echo $? > {out}.rc")
    lines.append(f"(cd {scratch}/upper && find . -mindepth 1 | sort) > {workdir}/changed")
    lines.append(f"cat {scratch}/upper/rocm-fleet/verifier/current/MANIFEST > {workdir}/manifest 2>/dev/null")
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(lines)],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=900,
    )
    scratch.rmdir()  # the tmpfs went away with the namespace
    assert done.returncode == 0, done.stderr
    results = []
    for index in range(len(runs)):
        out = workdir / f"run{index}"
        results.append(
            (int(Path(f"{out}.rc").read_text()), Path(f"{out}.out").read_text(), Path(f"{out}.err").read_text())
        )
    manifest = workdir / "manifest"
    return results, (workdir / "changed").read_text().split(), manifest.read_text() if manifest.exists() else ""


def tree_state(top: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in top.rglob("*") if p.is_file()}


@pytest.mark.root
@pytest.mark.slow
def test_verify_task_reports_fails_the_host_with_one_line_and_summarises_the_fleet(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root: mount namespaces")
    venv = torch_cpu_venv()
    reports = tmp_path / "reports"
    inventory = write_inventory(tmp_path / "inventory.py", venv, reports)
    before = tree_state(venv)
    (first, second, dry), changed, manifest = run_isolated(
        [
            [str(PYINFRA), str(inventory), "tasks/verify.py", "-y"],
            [str(PYINFRA), str(inventory), "tasks/verify.py", "-y"],
            [str(PYINFRA), str(inventory), "tasks/verify.py", "--dry", "-y"],
        ],
        tmp_path,
    )

    code, out, err = first
    output = out + err
    assert code == 1, output
    # The host is failed with the report's one line.
    failed = [line.strip() for line in output.splitlines() if "verification failed —" in line]
    assert len(failed) == 1, output
    assert (
        "@local: verification failed — linkage.static: libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) "
        "not found via RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib" in failed[0]
    )
    assert "Unexpected error" not in output and "Traceback" not in output

    # The report is on the controller, whole; the summary was written although every reachable host failed.
    report = json.loads((reports / "@local.json").read_text())
    assert report["verdict"] == "fail" and report["request"]["device"] == "cpu"
    assert report["request"]["torch_label"] == LABEL
    assert report["request"] == question_for(settings(**inventory_data(venv, reports))).to_request()
    summary = (reports / "summary.md").read_text()
    assert "| @local | **FAIL** | linkage.static +" in summary
    assert (
        f" | {report['host']['os']} | none | 2.13.0+cpu † |" in summary
        and f"† torch on 1 host @local: {LABEL}" in summary
    )
    assert (
        "| ws-down | **UNREACHABLE** | — |" in summary
        and "- **1 host ws-down** — **UNREACHABLE** could not connect" in summary
    )
    assert (reports / "summary.html").read_text().startswith("<!DOCTYPE html>")
    # Each run's verdicts are kept for the page's history strip: one per host and run (the --dry run adds none).
    history = json.loads((reports / "history.json").read_text())["hosts"]
    assert [e["verdict"] for e in history["@local"]] == ["FAIL", "FAIL"]
    assert [e["verdict"] for e in history["ws-down"]] == ["UNREACHABLE", "UNREACHABLE"]

    # Nothing changed on the host but the installed verifier (this checkout's version, every file of it in its
    # MANIFEST) and the report it keeps (no node_exporter directory here, so no metrics file): not elsewhere under
    # /var/lib, not in the venv.
    installed = f"./rocm-fleet/verifier/{version()}"
    files = {path for path in changed if path.startswith(installed + "/")}
    listed = {f"{installed}/{line[66:]}" for line in manifest.splitlines()}
    assert files - listed == {f"{installed}/MANIFEST"} | {path.rsplit("/", 1)[0] for path in listed}
    assert {path for path in changed if not path.startswith(installed + "/")} == {
        "./rocm-fleet",
        "./rocm-fleet/last-verify.json",
        "./rocm-fleet/verifier",
        "./rocm-fleet/verifier/current",
        "./rocm-fleet/verifier/launcher.py",
        installed,
    }
    assert tree_state(venv) == before

    # Second run: the verifier's install changes nothing (what it asks the host was read ahead, roles/verifier.py);
    # only running the check and judging it execute. (Text output:
    # with every reachable host failed, pyinfra 3.10 stops with "No hosts remaining!" before printing --json results.)
    code, out, err = second
    assert code == 1, err
    outcome = {}
    operation = None
    for line in (out + err).splitlines():
        if line.startswith("--> Starting operation: "):
            operation = line[len("--> Starting operation: ") :].strip()
        elif operation and line.strip().startswith("[@local]"):
            outcome.setdefault(operation, line.split("]", 1)[1].strip())
    assert outcome["Verify | Install the verifier"] == "No changes", outcome

    # --dry plans (and exits 1 for the unreachable host) but writes no summary.
    code, out, err = dry
    assert code == 1 and "Skipping change detection" in err, out + err
    assert "fleet summary" not in out + err


def settings(**data):
    found, problems = check_data("ws1", data)
    assert not problems, problems
    return found


def test_the_remote_command_always_reports_the_hosts_name_and_the_verifiers_exit_status():
    command = remote_command(settings())
    assert command.startswith(
        'echo rocm-fleet-verify-host="$(uname -n)"; ' + verifier_command(*check_arguments(settings()))
    )
    launcher = f"python3 -I -S /var/lib/rocm-fleet/verifier/launcher.py --version {version()} "
    assert launcher + "check --venv /opt/rocm-fleet/venv " in command
    assert command.endswith(f"(exit {REFUSED}); fi; echo rocm-fleet-verify-exit=$?")
    host_line = f"rocm-fleet-verify-host={os.uname().nodename}"
    done = subprocess.run(
        ["sh", "-c", command.replace("python3 -I -S ", "false ", 1).replace("sha256sum --check --status", "true", 1)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert done.stdout.splitlines() == [host_line, "rocm-fleet-verify-exit=1"]
    # A verifier that is not this checkout's (here: none at all) is not run, and that is the exit status reported;
    # the launcher's check writes nothing on stdout, which the controller reads strictly (reports.py).
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.stdout.splitlines() == [host_line, f"rocm-fleet-verify-exit={REFUSED}"]
    assert done.stderr.strip() == not_installed_line()
