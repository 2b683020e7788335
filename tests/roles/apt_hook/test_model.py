"""roles/apt_hook/model.py: dpkg's and apt's configuration as real dpkg and apt read them, and the hook's check as a
real shell runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roles.apt_hook.model import (
    DPKG_LINE_LIMIT,
    HOOK_PREFIX,
    SCRIPT_PATH,
    HookSpec,
    HookSpecError,
    apt_line,
    config_text,
    dpkg_config_text,
    hook_command,
    script_text,
)
from roles.settings import check_data
from roles.validators import PLAIN_CHARACTERS
from roles.verifier import LAUNCHER, launcher_sha256, not_installed_line, question_for
from tests.support.debs import build_deb
from verify.question import Question

QUESTION = Question(Path("/opt/rocm-fleet/venv"), "7.2.4", "0.50.1")
SPEC = HookSpec("/usr/bin/python3", QUESTION)


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt-config (Debian/Ubuntu)")
def test_apt_reads_the_configuration_as_one_post_invoke_command(tmp_path):
    conf = tmp_path / "80rocm-fleet-verify"
    conf.write_text(config_text())
    dumped = subprocess.run(
        ["apt-config", "-c", str(conf), "dump", "DPkg::Post-Invoke"], capture_output=True, text=True, check=True
    ).stdout
    ours = [
        m.group(1) for m in re.finditer(r'^DPkg::Post-Invoke:: "(.*)";$', dumped, re.M) if "rocm-fleet" in m.group(1)
    ]
    assert ours == [apt_line()]


@pytest.fixture
def private_dpkg(tmp_path):
    """dpkg on a private root and database, reading the hook's line as its configuration ($HOME/.dpkg.cfg, read after
    /etc/dpkg/dpkg.cfg.d), with a package to install: returns a runner of dpkg with extra environment."""
    for directory in ("root", "admin/updates", "admin/info", "home"):
        (tmp_path / directory).mkdir(parents=True)
    (tmp_path / "admin" / "status").write_text("")
    (tmp_path / "home" / ".dpkg.cfg").write_text(dpkg_config_text())
    deb = build_deb(tmp_path, {"Package": "rocm-fleet-test-ok", "Version": "1.0", "Architecture": "all"})

    def dpkg(*arguments: str, **environment: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["dpkg", f"--root={tmp_path}/root", f"--admindir={tmp_path}/admin", *arguments],
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), **environment},
        )

    return dpkg, deb


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dpkg"), reason="needs root and dpkg")
def test_dpkg_runs_its_line_after_a_run_that_changes_packages_unless_a_front_end_holds_its_lock(private_dpkg):
    """Real dpkg (Debian 12's 1.21) reads the line and runs it after `-i` and `--purge`, never failing the run; with
    DPKG_FRONTEND_LOCKED (what apt sets for the dpkg it runs) it does nothing. The script is not on this machine
    (/var/lib/rocm-fleet belongs to hosts): the line says so."""
    dpkg, deb = private_dpkg
    missing = f"{HOOK_PREFIX} not run - {SCRIPT_PATH} is missing (run tasks/apt_hook.py again)"
    for arguments in (["-i", str(deb)], ["--purge", "rocm-fleet-test-ok"]):
        done = dpkg(*arguments)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == missing, done.stdout
    for arguments in (["-i", str(deb)], ["--purge", "rocm-fleet-test-ok"]):
        done = dpkg(*arguments, DPKG_FRONTEND_LOCKED="true")
        assert done.returncode == 0 and missing not in done.stdout, done.stdout
    assert missing not in dpkg("-l").stdout  # a query changes nothing: no hook


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dpkg"), reason="needs root and dpkg")
def test_a_line_longer_than_dpkg_reads_would_fail_every_dpkg_run(private_dpkg, tmp_path):
    """Why the settings live in the script and dpkg's line is short: dpkg reads its configuration in pieces of 1023
    bytes, and the rest of a longer line is an unknown option that fails every run."""
    dpkg, deb = private_dpkg
    line = f"post-invoke=true {'x' * DPKG_LINE_LIMIT}"
    (tmp_path / "home" / ".dpkg.cfg").write_text(line + "\n")
    done = dpkg("-i", str(deb))
    assert done.returncode != 0 and "unknown option" in done.stderr, done.stderr
    assert len(dpkg_config_text().splitlines()[-1].encode()) < DPKG_LINE_LIMIT


def test_the_hook_line_never_fails_and_says_what_is_missing_in_one_line():
    """Run by a real shell as apt runs it (sh -c): python3 missing, then the verifier missing (it is never on this
    machine: /var/lib/rocm-fleet belongs to hosts)."""
    no_python = HookSpec("/nonexistent/python3", QUESTION)
    done = subprocess.run(["sh", "-c", hook_command(no_python)], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "rocm-fleet apt hook: not run - /nonexistent/python3 is missing (apt-get install python3, "
        "then run tasks/apt_hook.py again)\n"
    )
    done = subprocess.run(["sh", "-c", hook_command(SPEC)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == not_installed_line(HOOK_PREFIX) + "\n"


def test_and_whatever_the_verifier_exits_with_the_line_exits_0(tmp_path):
    failing = tmp_path / "python3"
    failing.write_text("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 3\n")
    failing.chmod(0o755)
    line = hook_command(HookSpec(str(failing), QUESTION))
    launcher_checked = f"echo '{launcher_sha256()}  {LAUNCHER}' | sha256sum --check --status 2>/dev/null"
    assert launcher_checked in line
    done = subprocess.run(["sh", "-c", line.replace(launcher_checked, "true")], capture_output=True, text=True)
    assert done.returncode == 0 and "boom" in done.stderr


def test_any_venv_path_the_inventory_accepts_goes_into_the_script_as_it_is():
    """The inventory's character policy (roles/settings.py, checked before any host is touched) is why the script
    needs no check of its own: a path using every character it allows reaches the shell unchanged. dpkg's and apt's
    lines carry no inventory data at all."""
    venv = "/srv/" + "".join(sorted(PLAIN_CHARACTERS - {"/"})) + "/venv"
    settings, problems = check_data("ws1", {"venv_path": venv, "bitsandbytes_version": "0.50.1+local.2"})
    assert problems == ()
    script = script_text("/usr/bin/python3", question_for(settings))
    assert f" --venv {venv} " in script and venv not in config_text() + dpkg_config_text()
    echoed = subprocess.run(["sh", "-c", f"printf '%s\\n' {venv}"], capture_output=True, text=True).stdout
    assert echoed == venv + "\n"


@pytest.mark.parametrize("python", ["/opt/my tools/python3", "python3", "/usr/bin/python3;rm"])
def test_a_host_python3_the_line_cannot_carry_is_refused(python):
    """The host's python3 is found on the host, not configured: the one value the hook line still checks."""
    with pytest.raises(HookSpecError) as raised:
        HookSpec(python, QUESTION)
    assert str(raised.value).startswith(
        f"apt hook: the host's python3 is {python!r}, a path the hook's script cannot carry"
    )
