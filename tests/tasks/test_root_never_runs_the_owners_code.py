"""Issue 9 for real, over SSH on a local Debian 12 workstation (localfleet), logged in as an admin with sudo as real
fleets are: the venv belongs to alice, an ordinary account of the workstation (`venv_owner: alice`), and root never
runs anything she can change.

alice drops `zz.pth` into her venv's site-packages: Python runs its `import` line at every start of that venv's
interpreter, and it appends the uid that ran it to a log. Across `deploy.py --dry`, a deploy in which pip really runs,
`tasks/verify.py`, an apt run (the hook) and the boot unit's command, the log must never show uid 0 — and must show
alice's uid where she legitimately runs (pip, the runtime probe), so the test can fail. Then: a verifier install while
alice has planted pyinfra's predictable temporary name, a launcher not this checkout's on the host at plan time, and a
module of the installed verifier alice was given: never run; and first of all, a venv_path under a directory every
account can write is refused before anything changes on the host.

The tests run in order on one host (each builds on the one before).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from pyinfra.api.util import sha1_hash

from roles.apt_hook.model import HOOK_DIR
from roles.boot_check.model import STATE_DIR
from roles.verifier import LAUNCHER, TOP, launcher_sha256, version
from tests.support.debs import build_deb
from tests.support.fleet_deploy import boot_unit_command, deploy, host_lines, summary_finding

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

VENV = "/opt/rocm-fleet/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
LOG = "/home/alice/pth-uids"  # alice's: she can append to it, and root can; nobody else runs her venv's python
PTH = (
    f"import os, sys; f = open({LOG!r}, 'a'); "
    "f.write('%d %s\\n' % (os.getuid(), ' '.join(sys.argv)[:160])); f.close()\n"
)
PREFIX = "rocm-fleet apt hook:"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("reports")
    # alice is not among workstation_users: the GPU groups her probe runs with (render, video, asserted from the
    # report) come from being venv_owner alone.
    with Fleet.up(
        n=1, login="admin", data={"venv_owner": "alice", "workstation_users": [], "reports_dir": str(reports)}
    ) as up:
        host = up.host("ws1")
        host.run(["useradd", "--create-home", "--shell", "/bin/bash", "alice"])
        uid = int(host.run(["id", "-u", "alice"]).stdout)
        yield up, host, uid, reports


def as_alice(host, command: str):
    return host.run(
        [
            "setpriv",
            "--reuid=alice",
            "--regid=alice",
            "--init-groups",
            "--reset-env",
            "--",
            "sh",
            "-c",
            f"cd / && {command}",
        ]
    )


def who_ran(host) -> list[tuple[int, str]]:
    """(uid, argv) of every start of the venv's python since the log was last emptied."""
    lines = (host.root / LOG.lstrip("/")).read_text().splitlines()
    return [(int(line.split(" ", 1)[0]), line.split(" ", 1)[1] if " " in line else "") for line in lines]


def empty_log(host) -> None:
    (host.root / LOG.lstrip("/")).write_text("")


def test_a_venv_path_other_accounts_can_write_is_refused_before_anything_changes(fleet):
    up, host, _, _ = fleet
    host.run(["sh", "-c", "mkdir -p /srv/shared && chmod 1777 /srv/shared"])
    for task in ("deploy.py", "tasks/venv.py"):
        run = deploy(up.inventory, task, "venv_path=/srv/shared/venv")
        assert run.returncode == 1, run.explain()
        [line] = [line for line in host_lines(run.log, "ws1") if "venv_path /srv/shared/venv" in line]
        assert line.endswith(
            "venv_path /srv/shared/venv: /srv/shared is writable by every account — another account "
            "could swap the venv and have its code run as alice; use a venv_path whose directories "
            "only root and alice can write (e.g. /opt/rocm-fleet/venv), or fix /srv/shared "
            "(chown root: / chmod go-w)"
        ), run.explain()
        assert list((host.root / "srv/shared").iterdir()) == []
        for untouched in ("var/lib/rocm-fleet", "var/cache/rocm-fleet", "opt/rocm-fleet"):
            assert not (host.root / untouched).exists(), f"{task} changed /{untouched} on a refused host"


def test_the_owners_pth_never_runs_as_root_during_dry_deploy_verify_and_apt(fleet, tmp_path):
    up, host, uid, reports = fleet
    first = deploy(up.inventory, "deploy.py")
    # Every host fails verification here by design (no system ROCm): exit 1, with a report.
    assert first.returncode == 1 and "verification failed — linkage.static" in first.log, first.explain()
    assert {path.lstat().st_uid for path in (host.root / VENV.lstrip("/")).rglob("*")} == {uid}

    log = host.root / LOG.lstrip("/")
    log.write_text("")
    os.chown(log, uid, uid)
    log.chmod(0o666)
    pth = host.root / SITE.lstrip("/") / "zz.pth"
    pth.write_text(PTH)
    os.chown(pth, uid, uid)
    as_alice(host, f"{VENV}/bin/python -c pass")  # the planted line works: it records alice
    # (once per site directory Python finds it in: lib64 is a link to lib in a Debian venv)
    assert set(who_ran(host)) == {(uid, "-c")}

    empty_log(host)
    plan = deploy(up.inventory, "deploy.py", dry=True)
    assert plan.returncode == 0, plan.explain()
    assert [run for run in who_ran(host) if run[0] == 0] == [], "deploy.py --dry ran alice's code as root"

    # pip must really run: alice removes bitsandbytes from her venv, and the venv stage puts it back.
    as_alice(host, f"{VENV}/bin/python -m pip uninstall -y -q bitsandbytes")
    empty_log(host)
    again = deploy(up.inventory, "deploy.py")
    assert again.returncode == 1, again.explain()
    ran = who_ran(host)
    assert [run for run in ran if run[0] == 0] == [], f"deploy.py ran alice's code as root: {ran}"
    # pip, as alice (sys.argv is ["-m", "install", …] while site-packages is read)
    assert any(argv.startswith("-m install --isolated") for _, argv in ran), ran
    assert any(argv.startswith("- --device cpu") for _, argv in ran), ran  # the runtime probe, as alice
    report = json.loads((reports / "ws1.json").read_text())
    account = report["facts"]["probe_account"]
    assert account["user"] == "alice" and account["uid"] == uid and {"render", "video"} <= set(account["groups"])

    empty_log(host)
    verify = deploy(up.inventory, "tasks/verify.py")
    assert verify.returncode == 1 and "verification failed — linkage.static" in verify.log, verify.explain()
    ran = who_ran(host)
    assert ran and all(run_uid == uid for run_uid, _ in ran), f"tasks/verify.py: {ran}"

    empty_log(host)
    last = host.root / HOOK_DIR.lstrip("/") / "last.json"
    before = last.read_text()
    deb = build_deb(tmp_path, {"Package": "rocm-fleet-test-ok", "Version": "1.0", "Architecture": "all"})
    (host.root / "tmp/ok.deb").write_bytes(deb.read_bytes())
    done = host.ssh(["sudo", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "install", "/tmp/ok.deb"])
    # The hook prints nothing when nothing changed; that it ran shows in the result it records after every dpkg run.
    assert last.read_text() != before, f"the apt hook did not run: {done.stdout[-2000:]}"
    assert not [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(PREFIX)], done.stdout
    assert who_ran(host) == [], "the apt hook (root) ran the venv's python"

    # The boot unit (installed by deploy.py's boot check stage) runs as root; its runtime probe and NF4 run as alice.
    # Its command is run by hand, as root, so its output is read here (systemd runs it at a real boot in
    # tests/tasks/test_booted_hosts.py).
    empty_log(host)
    boot = host.ssh(["sudo", "sh", "-c", boot_unit_command(host.root)], check=False)
    assert boot.returncode == 1 and "FAIL — linkage.static" in boot.stdout, boot.stdout + boot.stderr
    ran = who_ran(host)
    assert any(argv.startswith("- --device cpu") for _, argv in ran), ran  # the probe ran …
    assert all(run_uid == uid for run_uid, _ in ran), f"the boot check ran alice's code as root: {ran}"  # … as alice
    kept = json.loads((host.root / STATE_DIR.lstrip("/") / "last.json").read_text())
    assert kept["report"]["facts"]["probe_account"]["user"] == "alice"


def test_a_verifier_not_this_checkouts_or_not_roots_alone_is_never_run_and_a_planted_upload_name_is_not_used(fleet):
    """High 2: pyinfra's sudo upload staged a file in /tmp/pyinfra-<sha1 of the destination>, a name alice can
    compute and plant (here: her own file, writable by all — the same works with a symlink or a FIFO when
    fs.protected_* are 0); and the strays fact ran whatever verifier the host had, as root, while planning. Now a
    launcher that is not this checkout's is not run, the archive goes through a private staging directory to a name
    with 128 random bits, and a version of which alice owns a file is refused by the launcher (the status says so in
    one line) until the next run installs it again."""
    up, host, uid, reports = fleet
    marker = host.root / "var/tmp/stale-verifier-ran"
    launcher = host.root / LAUNCHER.lstrip("/")
    launcher.write_text("open('/var/tmp/stale-verifier-ran', 'a').write('ran\\n')\nprint('null')\n")
    planted = host.root / "tmp" / f"pyinfra-{sha1_hash(LAUNCHER)}"
    planted.write_text("alice's\n")
    os.chown(planted, uid, uid)
    planted.chmod(0o666)

    plan = deploy(up.inventory, "deploy.py", dry=True)
    assert plan.returncode == 0, plan.explain()
    assert not marker.exists(), "a verifier that is not this checkout's ran while planning"

    run = deploy(up.inventory, "tasks/verify.py")
    assert run.returncode == 1 and "verification failed — linkage.static" in run.log, run.explain()
    assert hashlib.sha256(launcher.read_bytes()).hexdigest() == launcher_sha256()
    assert not marker.exists()
    assert planted.read_text() == "alice's\n" and planted.stat().st_uid == uid
    assert not [path for path in (host.root / "tmp").iterdir() if path.name.startswith("rocm-fleet-upload-")]
    for directory in (host.root / "var/lib/rocm-fleet", host.root / TOP.lstrip("/")):
        assert (directory.stat().st_uid, directory.stat().st_mode & 0o777) == (0, 0o755)
    installed = host.root / TOP.lstrip("/") / version()
    assert all(path.stat().st_uid == 0 and not path.stat().st_mode & 0o022 for path in installed.rglob("*"))

    # A module of the installed verifier given to alice (an admin's chown -R, say): nothing runs it as root.
    os.chown(installed / "verify" / "cli.py", uid, uid)
    status = deploy(up.inventory, "tasks/status.py")
    assert status.returncode == 0, status.explain()  # the status changes nothing and fails no host: it reports
    finding = summary_finding((reports / "status.md").read_text(), "ws1")
    assert finding.startswith("**NOT VERIFIED** could not read what the host keeps: rocm-fleet verifier: not run - ")
    assert "verify/cli.py is not root's alone (owner uid" in finding, finding
    run = deploy(up.inventory, "tasks/verify.py")
    assert f"verifier {version()[:12]} on the host: " in run.log and "installing it again" in run.log, run.explain()
    assert (installed / "verify" / "cli.py").stat().st_uid == 0
    assert "verification failed — linkage.static" in run.log, run.explain()
