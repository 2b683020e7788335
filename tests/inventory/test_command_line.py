"""The commands the README gives, typed exactly so from the repository root: `pyinfra inventory deploy.py --dry`,
`pyinfra inventory tasks/verify.py --dry`, and both without `--dry` up to pyinfra's confirmation — against the
repository's own fleet (`inventory` → inventories/example.py, group data from group_data/), unchanged.

The example's hosts (ws-ml-0N.lab.example.org, rf-07.lab.example.org) do not exist, and a test must not look for
them. So pyinfra is given a user SSH configuration (its HOME) that carries every example host name, whatever its port,
through a ProxyCommand (tests/support/tcp_relay.py) to one real local Debian 12 workstation (localfleet), whose host
key is known under each example name (StrictHostKeyChecking yes) and which has the admin account the example logs in
as (`fleetadmin`, sudo; group_data/lab_fleet.py). What is real: pyinfra's CLI loading the word `inventory`, its group
data, our validation, SSH, sudo, every fact. What the plan then says is the truth about that workstation: it has no
AMD GPU, so preflight stops every host (the example asks for a GPU, as real fleets do), and nothing after runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
RELAY = REPO / "tests" / "support" / "tcp_relay.py"
HOSTS = {
    "ws-ml-01.lab.example.org": 22,
    "ws-ml-02.lab.example.org": 22,
    "ws-ml-03.lab.example.org": 22,
    "rf-07.lab.example.org": 2222,
}  # the ports inventories/example.py gives them
LOGIN = "fleetadmin"  # group_data/lab_fleet.py
ADD_LOGIN = (
    f"useradd --create-home --shell /bin/bash --groups sudo {LOGIN}"
    f" && install -d -m 700 -o {LOGIN} -g {LOGIN} /home/{LOGIN}/.ssh"
    f" && install -m 600 -o {LOGIN} -g {LOGIN} /home/admin/.ssh/authorized_keys /home/{LOGIN}/.ssh/"
    f" && echo '{LOGIN} ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/{LOGIN}"
    f" && chmod 440 /etc/sudoers.d/{LOGIN}"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A HOME whose ~/.ssh/config carries the example's host names to a local test workstation."""
    from localfleet.fleet import Fleet

    with Fleet.up(n=1, login="admin") as up:
        workstation = up.hosts[0]
        workstation.run(["sh", "-c", ADD_LOGIN])
        key_type, key = up.host_state(workstation.name).host_public_key.split()[:2]
        home = tmp_path_factory.mktemp("home")
        ssh = home / ".ssh"
        ssh.mkdir(mode=0o700)
        known_hosts = ssh / "known_hosts"
        # paramiko looks a key up under the name it connects to: "name", or "[name]:port" off port 22.
        known_hosts.write_text(
            "".join(f"{name if port == 22 else f'[{name}]:{port}'} {key_type} {key}\n" for name, port in HOSTS.items())
        )
        (ssh / "config").write_text(
            f"Host {' '.join(HOSTS)}\n"
            f"    ProxyCommand {sys.executable} {RELAY} {workstation.port}\n"
            f"    IdentityFile {up.client_key}\n"
            f"    UserKnownHostsFile {known_hosts}\n"
            "    StrictHostKeyChecking yes\n"
        )
        yield home


def pyinfra(home: Path, *argv: str, answer: str | None = None) -> subprocess.CompletedProcess:
    """`pyinfra ARGV…` from the repository root, as a user types it; `answer`: what the user types at the prompt."""
    done = subprocess.run(
        [PYINFRA, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        input=answer,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(home), "LANG": "C.UTF-8", "PYINFRA_PROGRESS": "off"},
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-5000:]
    return done


def _plan(log: str) -> list[str]:
    """The lines of pyinfra's "Detected changes" table: one per operation, with the hosts it changes."""
    lines = log.split("--> Detected changes:", 1)[1].split("Detected changes may not include", 1)[0].splitlines()
    return [line.strip() for line in lines[2:] if line.strip()]


def _columns(line: str) -> tuple[str, str, str]:
    """A plan line's operation, Change and Conditional Change columns (pyinfra pads them with spaces)."""
    operation, change, conditional = re.split(r"\s{2,}", line)
    return operation, change, conditional


def _connected(log: str) -> set[str]:
    return {
        name
        for name in HOSTS
        if any(line.strip().startswith(f"[{name}]") and line.strip().endswith("Connected") for line in log.splitlines())
    }


def _reports() -> set[Path]:
    return set((REPO / "reports").rglob("*")) if (REPO / "reports").exists() else set()


def test_pyinfra_inventory_deploy_dry_plans_the_example_fleet(home):
    before = _reports()
    done = pyinfra(home, "inventory", "deploy.py", "--dry")
    assert done.returncode == 0, done.stderr[-5000:]
    assert _connected(done.stderr) == set(HOSTS), done.stderr
    plan = _plan(done.stderr)
    # Validation passed (a refusal ends the run before any plan), the facts were read; no GPU: preflight stops each
    # host, and no later operation would change any.
    (first, first_change, _), *later = [_columns(line) for line in plan]
    assert first.startswith("tasks/preflight.py | Preflight | stop: host is not fit"), plan
    assert first_change.startswith("4 ("), plan
    assert all(change == conditional == "-" for _, change, conditional in later), plan
    assert _reports() == before  # --dry writes no report or summary


def test_pyinfra_inventory_tasks_verify_dry_plans_the_verification(home):
    done = pyinfra(home, "inventory", "tasks/verify.py", "--dry")
    assert done.returncode == 0, done.stderr[-5000:]
    assert _connected(done.stderr) == set(HOSTS), done.stderr
    plan = _plan(done.stderr)
    assert any(
        operation.startswith("Verify | Run the verifier") and change.startswith("4 (")
        for operation, change, _ in map(_columns, plan)
    ), plan


@pytest.mark.parametrize("task", ["deploy.py", "tasks/verify.py"])
def test_without_dry_the_plan_waits_for_the_user_and_nothing_runs_when_declined(home, task):
    """`pyinfra inventory deploy.py` as typed: the same plan, then pyinfra's prompt; any answer but Enter declines."""
    done = pyinfra(home, "inventory", task, answer="no\n")
    assert done.returncode == 0, done.stderr[-5000:]
    assert _plan(done.stderr), done.stderr
    assert "Press enter to execute..." in done.stderr
    assert "--> Beginning operation run..." not in done.stderr, done.stderr


def test_bad_data_is_refused_before_the_plan_in_one_line_naming_host_and_key(home):
    done = pyinfra(home, "inventory", "deploy.py", "--dry", "--data", "rocm_release=7.2")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "pyinfra error" in line]
    assert len(errors) == 1, done.stderr
    assert "inventory data of host ws-ml-01.lab.example.org, key rocm_release (--data): got the number 7.2" in errors[0]
    assert "--> Detected changes:" not in done.stderr
