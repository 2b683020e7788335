"""bin/demo, the README's main command (localfleet/demo.py), run as a user runs it: a fleet of its own (three hosts)
comes up, the real deploy runs, the summary and its meaning are printed, the fleet goes — also on Ctrl-C and SIGTERM.

How the demo judges a result (localfleet/demo_verdict.py) is tested on real reports in tests/localfleet/
test_demo_verdict.py and on the shared fleet's reports in test_deploy.py.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.fleet_checks import booted_hosts, booted_leftovers, leftovers
from tests.support.signals import block_interrupts

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: bin/demo brings up a local fleet"),
]

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "bin" / "demo")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
NOT_ROOT = (
    "bin/demo: must run as root — it builds three local Debian 12 test workstations (containers that boot "
    "systemd, sshd on 127.0.0.1): run `sudo bin/demo`\n"
)
DEPLOYING = re.compile(r"^== Deploying: \S+/pyinfra (\S+/fleets/[^/]+)/inventory\.py deploy\.py -y ==$")


def fleet_directory(output: str) -> Path:
    """The directory of the fleet bin/demo brought up, from its "== Deploying: …" line."""
    [directory] = [Path(m.group(1)) for m in map(DEPLOYING.match, output.splitlines()) if m]
    return directory


def ports_of(directory: Path) -> list[int]:
    """The sshd ports in a fleet's inventory (read while it still exists: a data-only Python literal)."""
    tree = ast.parse((directory / "inventory.py").read_text())
    group = ast.literal_eval(tree.body[-1].value)
    return [data["ssh_port"] for _, data in group[0]]


def test_the_demo_deploys_three_hosts_prints_the_summary_and_calls_the_result_expected(tmp_path):
    reports = tmp_path / "reports"
    done = subprocess.run([DEMO, "--reports-dir", str(reports)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    directory = fleet_directory(done.stdout)
    ports = [int(port) for port in re.findall(r"ws\d listens on 127\.0\.0\.1:(\d+)", done.stderr)]
    assert len(ports) == 3, done.stderr[-3000:]
    assert leftovers(directory, ports) == [] and not directory.exists()

    summary = (reports / "summary.md").read_text(encoding="utf-8")
    assert f"== Fleet summary ({reports / 'summary.md'}) ==\n\n{summary}" in done.stdout
    assert "3 host(s): 3 fail" in summary
    assert sorted(p.name for p in reports.glob("ws*.json")) == ["ws1.json", "ws2.json", "ws3.json"]
    meaning = done.stdout.split("== What this means ==\n", 1)[1]
    assert meaning.startswith("\nThe expected result: all 3 test workstations were provisioned over SSH and verified")
    assert "libhipblas.so.3 is not found" in meaning and "stand-in for the ROCm wheel" in meaning
    # pyinfra itself ran and failed every host at verification, as the meaning says.
    assert "--> pyinfra error: No hosts remaining!" in done.stderr


def test_the_demo_refuses_to_run_unless_root_in_one_line():
    for argv in ([DEMO], [str(REPO / ".venv/bin/python"), "-m", "localfleet.demo"]):
        done = subprocess.run([*NOBODY, *argv], capture_output=True, text=True, cwd=REPO)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", NOT_ROOT), argv


@pytest.mark.parametrize("how", ["Ctrl-C", "SIGTERM"])
@pytest.mark.parametrize("options", [(), ("--chroot",)], ids=["booted", "chroot"])
def test_an_interrupted_demo_tears_its_fleet_down_even_if_started_with_the_signal_blocked(how, options, tmp_path):
    """Its hosts boot (then nothing of systemd-nspawn's may be left either: its process, the host's cgroup, its
    /run/systemd/nspawn files, the lock of the host's root), or with --chroot are chroots."""
    with open(tmp_path / "stderr", "w") as stderr_file:
        process = subprocess.Popen(
            [DEMO, "--reports-dir", str(tmp_path), *options],
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            start_new_session=True,
            preexec_fn=block_interrupts,
        )
    directory = None
    try:
        seen = []
        for line in process.stdout:
            seen.append(line)
            if DEPLOYING.match(line.rstrip("\n")):
                break
        directory = fleet_directory("".join(seen))
        ports = ports_of(directory)
        assert (directory / "hosts").is_dir() and leftovers(directory, ports) != []  # it is up
        booted = booted_hosts(directory)
        assert len(booted) == (0 if "--chroot" in options else 3)  # systemd-nspawn runs each
        assert len(booted_leftovers(booted)) >= 3 * len(booted)  # its process, cgroup and lock, seen while up
        if how == "Ctrl-C":
            os.killpg(process.pid, signal.SIGINT)  # what a terminal does: the whole foreground group gets it
        else:
            process.send_signal(signal.SIGTERM)  # what `timeout` or a service manager does: bin/demo alone gets it
        process.communicate()
        stderr = (tmp_path / "stderr").read_text()
        assert process.returncode == 130, stderr[-3000:]
        name = "SIGINT" if how == "Ctrl-C" else "SIGTERM"
        assert f"interrupted ({name}); the fleet has been torn down" in stderr
        assert leftovers(directory, ports) == [] and booted_leftovers(booted) == [] and not directory.exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if directory is not None and directory.exists():  # killed, or it ignored the signal: no fleet may outlive it
            subprocess.run(
                [str(REPO / ".venv/bin/python"), "-m", "localfleet", "down", "--name", directory.name], cwd=REPO
            )
