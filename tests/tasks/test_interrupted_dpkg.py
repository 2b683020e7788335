"""An interrupted dpkg run on a real local-fleet host (Debian 12 over SSH, an admin with sudo), met by the ROCm stage
(roles/debian/apt_commands.py wraps its apt-get): the host fails with one line that names the fix, and that fix, run as
the line says, lets the next run go through.

The interruption is real: `dpkg -i` of a package whose postinst waits, killed (SIGKILL, as a lost SSH session or a
power cut would end it) while the postinst runs — dpkg leaves its journal in /var/lib/dpkg/updates/ and the package
half-configured, and the real apt-get then refuses to work. The ROCm stage runs against the stand-in of
repo.radeon.com (tests/support/amd_mirror.py: AMD's layout and names, labelled stand-in packages).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from roles.debian.apt_commands import INTERRUPTED_FIX, interrupted_message
from tests.support.amd_mirror import build_deb, build_mirror, serving
from tests.support.fleet_checks import rooted_processes
from tests.support.fleet_deploy import ENV, PYINFRA, REPO, deploy, host_lines

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

STARTED = "rocm-fleet test: postinst started"
# Waits only while its FIFO exists: once the test has removed it, `dpkg --configure -a` finishes the package.
POSTINST = f"""#!/bin/sh
echo '{STARTED}'
if [ -p /tmp/postinst-waits ]; then read line < /tmp/postinst-waits; fi
"""


@pytest.fixture(scope="module")
def workstation(tmp_path_factory):
    from localfleet.fleet import Fleet

    mirror = tmp_path_factory.mktemp("mirror") / "radeon"
    mirror.mkdir()
    with serving(mirror) as url:
        data = {
            "rocm_install": "install",
            "min_free_disk_gb": 1,
            "repo_radeon_base_url": url,
            "amdgpu_install_sha256": build_mirror(mirror, url),
            "dpkg_lock_timeout": 30,
        }
        with Fleet.up(n=1, login="admin", data=data) as up:
            host = up.host("ws1")
            host.apt_install(["wget"])  # a workstation has it (pyinfra downloads with it); the test root does not
            deb = build_deb(
                tmp_path_factory.mktemp("debs"),
                {"Package": "rocm-fleet-test-interrupted", "Version": "1.0", "Architecture": "all"},
                scripts={"postinst": POSTINST},
            )
            (host.root / "tmp" / deb.name).write_bytes(deb.read_bytes())
            yield up, host, f"/tmp/{deb.name}"


def interrupt_dpkg(host, deb: str) -> None:
    """`dpkg -i DEB` in the host, SIGKILLed (with its postinst) once the postinst runs."""
    os.mkfifo(host.root / "tmp/postinst-waits")
    dpkg = subprocess.Popen(
        host.command(["dpkg", "-i", deb]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = []
    for line in dpkg.stdout:  # a condition, not a time: dpkg has reached the postinst
        output.append(line)
        if line.strip() == STARTED:
            break
    os.killpg(dpkg.pid, signal.SIGKILL)  # dpkg, and the postinst in its process group
    dpkg.wait()
    dpkg.stdout.close()
    assert output and output[-1].strip() == STARTED, "".join(output)
    (host.root / "tmp/postinst-waits").unlink()
    left = [p for p in rooted_processes(host.root) if session_of(p.pid) == dpkg.pid]
    assert left == [], left


def session_of(pid: int) -> int | None:
    """The session id of process `pid` (None once it has gone or is a zombie). The dpkg run is a session of its own
    (start_new_session): what is left of it is whatever is left in that session — not the host's own processes (sshd,
    and a booted host's systemd and its services), which were there before it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in "ZX" else int(fields[3])


def test_an_interrupted_dpkg_fails_the_host_with_one_line_naming_the_fix(workstation):
    up, host, deb = workstation
    interrupt_dpkg(host, deb)
    assert os.listdir(host.root / "var/lib/dpkg/updates"), "dpkg left no journal"
    status = host.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "rocm-fleet-test-interrupted"]).stdout
    assert status.strip() == "iF", status  # half-configured

    run = deploy(up.inventory, "tasks/rocm.py")
    assert run.returncode == 1, run.explain()
    # apt's own words are kept (it writes 'sudo dpkg --configure -a' when run through sudo), and one line of ours
    # says what to do.
    assert "E: dpkg was interrupted, you must manually run 'sudo dpkg --configure -a' to correct the problem." in (
        run.log
    )
    assert interrupted_message() in host_lines(run.log, "ws1"), run.explain()
    assert not (host.root / "opt/rocm-7.2.4").exists()


def test_the_fix_the_line_names_lets_the_next_run_through(workstation):
    up, host, _ = workstation
    # INTERRUPTED_FIX, word for word, with this fleet's inventory (its _sudo: True makes it run as root).
    words = INTERRUPTED_FIX.split()
    assert words[:3] == ["pyinfra", "INVENTORY", "exec"]
    done = subprocess.run(
        [PYINFRA, str(up.inventory), "exec", "-y", *words[3:]], capture_output=True, text=True, cwd=REPO, env=ENV
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.run(["dpkg", "--audit"]).stdout == ""
    assert not os.listdir(host.root / "var/lib/dpkg/updates")

    run = deploy(up.inventory, "tasks/rocm.py")
    assert run.returncode == 0, run.explain()
    assert (Path(host.root) / "opt/rocm-7.2.4/.info/version").is_file()
