"""roles/apt_hook/model.py: the apt configuration as real apt reads it, and the hook line as a real shell runs it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roles.apt_hook.model import HOOK_PREFIX, HookSpec, HookSpecError, config_text, hook_command
from roles.settings import check_data
from roles.validators import PLAIN_CHARACTERS
from roles.verifier import LAUNCHER, launcher_sha256, not_installed_line, question_for
from verify.question import Question

QUESTION = Question(Path("/opt/rocm-fleet/venv"), "7.2.4", "0.50.1")
SPEC = HookSpec("/usr/bin/python3", QUESTION)


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt-config (Debian/Ubuntu)")
def test_apt_reads_the_configuration_as_one_post_invoke_command(tmp_path):
    conf = tmp_path / "80rocm-fleet-verify"
    conf.write_text(config_text(SPEC))
    dumped = subprocess.run(
        ["apt-config", "-c", str(conf), "dump", "DPkg::Post-Invoke"], capture_output=True, text=True, check=True
    ).stdout
    ours = [
        m.group(1) for m in re.finditer(r'^DPkg::Post-Invoke:: "(.*)";$', dumped, re.M) if "rocm-fleet" in m.group(1)
    ]
    assert ours == [hook_command(SPEC)]


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


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt-config (Debian/Ubuntu)")
def test_any_venv_path_the_inventory_accepts_goes_into_the_line_as_it_is(tmp_path):
    """The inventory's character policy (roles/settings.py, checked before any host is touched) is why the hook line
    needs no check of its own: a path using every character it allows reaches apt, and the shell, unchanged."""
    venv = "/srv/" + "".join(sorted(PLAIN_CHARACTERS - {"/"})) + "/venv"
    settings, problems = check_data("ws1", {"venv_path": venv, "bitsandbytes_version": "0.50.1+local.2"})
    assert problems == ()
    spec = HookSpec("/usr/bin/python3", question_for(settings))
    conf = tmp_path / "80rocm-fleet-verify"
    conf.write_text(config_text(spec))
    dumped = subprocess.run(
        ["apt-config", "-c", str(conf), "dump", "DPkg::Post-Invoke"], capture_output=True, text=True, check=True
    ).stdout
    assert f'DPkg::Post-Invoke:: "{hook_command(spec)}";' in dumped.splitlines()
    assert f" --venv {venv} " in hook_command(spec)
    echoed = subprocess.run(["sh", "-c", f"printf '%s\\n' {venv}"], capture_output=True, text=True).stdout
    assert echoed == venv + "\n"


@pytest.mark.parametrize("python", ["/opt/my tools/python3", "python3", "/usr/bin/python3;rm"])
def test_a_host_python3_the_line_cannot_carry_is_refused(python):
    """The host's python3 is found on the host, not configured: the one value the hook line still checks."""
    with pytest.raises(HookSpecError) as raised:
        HookSpec(python, QUESTION)
    assert str(raised.value).startswith(
        f"apt hook: the host's python3 is {python!r}, a path the apt configuration line cannot carry"
    )
