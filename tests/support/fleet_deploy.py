"""The real pyinfra CLI against a local fleet's inventory (localfleet), and reading what a run left behind.

    run = deploy(fleet.inventory)                                   # pyinfra INVENTORY deploy.py -y --json
    run = deploy(fleet.inventory, "deploy.py", "dpkg_lock_timeout=5")
    run = deploy(fleet.inventory, "tasks/rocm.py", limit="ws2")     # … --limit ws2: only that host
    run = deploy(fleet.inventory, dry=True)                         # pyinfra INVENTORY deploy.py --dry --json
    host_lines(run.log, "ws2")                                      # what pyinfra printed for one host
    operation_names(run.log, "Venv | Wheelhouse")                   # one operation's names, as a set
    summary_row((reports / "summary.md").read_text(), "ws2")       # that host's row of the fleet summary
    summary_finding(summary, "ws2")                                 # the finding its verdict rests on
    snapshot(host.root)                                             # every path of a host's filesystem, to compare
                                                                    # (journald's own files left out)
    boot_unit_command(host.root)                                    # the boot unit's ExecStart, to run by hand

pyinfra prints its --json results only when at least one host is still active at the end: when every host fails
(the local fleet's hosts all fail verification, by design) `run.results` is {} and the run is read from `run.log`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import hostlist

from tests.support.chroot_hosts import PyinfraRun, finished

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
# No user configuration leaks in; no spinner in captured output.
ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root", "LANG": "C.UTF-8", "PYINFRA_PROGRESS": "off"}
# Where a run may leave traces that are not changes made by the deploy: kernel filesystems, sshd's and sudo's
# runtime files, temporary files.
NOT_HOST_STATE = ("proc", "sys", "dev", "run", "tmp")
# What a booted host's journald writes whatever a run does (a chroot has none): its journal, where every log line of
# the host goes — sshd's and sudo's for each of pyinfra's logins, and the login's own user journal. Exactly these, so
# that anything else written in /var/log/journal still counts: /var/log/journal/<machine id>/ and the journal files in
# it (*.journal, and *.journal~ for one journald set aside). Nothing of rocm-fleet is kept there.
_JOURNAL_FILE = re.compile(r"/var/log/journal/[0-9a-f]{32}(/[A-Za-z0-9@._-]+\.journal~?)?")


def deploy_argv(
    inventory: Path,
    task: str = "deploy.py",
    *data: str,
    limit: str | None = None,
    dry: bool = False,
    probe: Path | None = None,
) -> list[str]:
    # probe: bench/run_probe.py rides along (first deploy file) and writes what each host was asked to `probe`.
    argv = [
        PYINFRA,
        str(inventory),
        *(["bench/run_probe.py"] if probe else []),
        task,
        "--dry" if dry else "-y",
        "--json",
    ]
    if limit is not None:
        argv += ["--limit", limit]
    for item in data:
        argv += ["--data", item]
    return argv


def deploy(
    inventory: Path,
    task: str = "deploy.py",
    *data: str,
    timeout: float | None = None,
    limit: str | None = None,
    dry: bool = False,
    probe: Path | None = None,
) -> PyinfraRun:
    """`pyinfra INVENTORY TASK -y --json [--limit HOST] [--data K=V …]` from the repository root, as users run it
    (dry=True: `--dry` instead of `-y`: the plan, nothing changed). No time limit unless given: a run takes what the
    machine's load makes it take (pytest-timeout is the hang guard). probe: a path where bench/run_probe.py writes
    every command and file transfer of each host, by stage (it changes nothing and adds no operation)."""
    env = {**ENV, "ROCM_FLEET_PROBE": str(probe)} if probe else ENV
    done = subprocess.run(
        deploy_argv(inventory, task, *data, limit=limit, dry=dry, probe=probe),
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )
    return finished(done)


def start_deploy(inventory: Path, task: str = "deploy.py", *data: str) -> subprocess.Popen:
    """The same run, started in the background (communicate() it, then `finished(CompletedProcess(...))`)."""
    return subprocess.Popen(
        deploy_argv(inventory, task, *data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=ENV,
    )


def host_lines(log: str, host: str) -> list[str]:
    """The lines pyinfra printed for `host` ("[ws2] …"), without the prefix."""
    prefix = f"[{host}] "
    return [line.strip()[len(prefix) :] for line in log.splitlines() if line.strip().startswith(prefix)]


def operation_names(log: str, contains: str) -> set[str]:
    """The names pyinfra printed for the one operation whose "--> Starting operation:" line contains `contains`. An
    operation named differently on different hosts gets all the names on one line, joined from a set: their order
    follows the pyinfra process's hash seed, so they are compared as a set."""
    starts = [
        line.split("--> Starting operation: ", 1)[1].strip()
        for line in log.splitlines()
        if line.startswith("--> Starting operation: ") and contains in line
    ]
    assert len(starts) == 1, starts
    return set(starts[0].split(", "))


def summary_row(summary: str, host: str) -> str:
    """`host`'s row of the fleet summary's table (reports/summary.md, given as text)."""
    rows = [line for line in summary.splitlines() if line.startswith(f"| {host} |")]
    assert len(rows) == 1, f"the summary has {len(rows)} rows for {host}:\n{summary}"
    return rows[0]


def summary_finding(summary: str, host: str) -> str:
    """The finding `host`'s verdict rests on, as the summary's Findings list says it ("**FAIL** linkage.static: …"),
    found by the host's name in the group's folded list (ws[1-3] counts for ws2)."""
    found = []
    for line in summary.split("## Findings", 1)[1].split("\n## ", 1)[0].splitlines():
        match = re.match(r"- \*\*\d+ hosts? (.+?)\*\* — (.*)$", line)
        if match and host in hostlist.expand_hostlist(match.group(1)):
            found.append(match.group(2))
    assert len(found) == 1, f"the summary has {len(found)} findings for {host}:\n{summary}"
    return found[0]


def read_reports(reports_dir: Path, hosts) -> dict[str, dict | None]:
    """host -> reports/<host>.json as it is now (None when there is none)."""
    found = {}
    for host in hosts:
        path = reports_dir / f"{host}.json"
        found[host] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return found


def boot_unit_command(root: Path, key: str = "ExecStart") -> str:
    """The ExecStart command of the boot check's unit on a host, for tests that run it by hand and read its output
    (`sh -c` reads systemd's quoting of these words alike); systemd runs it at a boot in test_booted_hosts.py."""
    from roles.boot_check.model import UNIT_PATH

    unit = (root / UNIT_PATH.lstrip("/")).read_text()
    [line] = [line for line in unit.splitlines() if line.startswith(f"{key}=")]
    return line[len(f"{key}=") :]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path of a host's filesystem with its mtime, size and mode — kernel filesystems, /run and /tmp left out,
    and a booted host's journal files (_JOURNAL_FILE: what its journald writes on its own)."""
    found = {}
    for top in sorted(os.listdir(root)):
        if top in NOT_HOST_STATE:
            continue
        for directory, subdirectories, files in os.walk(root / top):
            for name in subdirectories + files:
                path = os.path.join(directory, name)
                in_host = path[len(str(root)) :]
                if _JOURNAL_FILE.fullmatch(in_host):
                    continue
                info = os.lstat(path)
                found[in_host] = (info.st_mtime_ns, info.st_size, info.st_mode)
    return found
