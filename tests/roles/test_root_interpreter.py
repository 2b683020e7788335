"""The interpreter root runs the verifier with is held to the venv's rule (verify/launcher.py `interpreter_problem`):
the python3 binary and the directories above it, the standard library and lib-dynload with every file in them, root's
alone — else one line, and nothing of the verifier (nor a module it would import) runs. And what `-S` keeps out.

A real interpreter tree made unsafe: a copy of this machine's Debian python3.11 (its binary and /usr/lib/python3.11,
which it finds beside it as its prefix) in a private directory, changed the ways another account could have changed a
workstation's; never this machine's own python. The verifier is installed as on a host
(tests/support/installed_verifier.py) and run through its launcher with the copy, as the apt hook, the boot unit and
the status task run it (`python3 -I -S launcher.py …`).
"""

from __future__ import annotations

import grp
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roles.apt_hook.model import script_text
from roles.boot_check.model import boot_check_arguments, unit_text
from roles.settings import check_data
from roles.verification.deploy import check_arguments
from roles.verifier import LAUNCHER, archive
from tests.support.installed_verifier import install, launch, run_install
from verify.question import Question

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the verifier and the interpreter must be root's"),
    pytest.mark.skipif(not Path("/usr/bin/python3.11").is_file(), reason="needs Debian 12's /usr/bin/python3.11"),
]

STAFF = grp.getgrnam("staff").gr_gid if "staff" in {g.gr_name for g in grp.getgrall()} else 50
MARK = "/tmp/rocm-fleet-test-interpreter-ran"


@pytest.fixture(scope="module")
def verifier(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("interp") / "verifier")


@pytest.fixture
def python(tmp_path) -> Path:
    """A copy of Debian's python3.11: PREFIX/bin/python3.11 and PREFIX/lib/python3.11 (its test suite left out), its
    argparse — which the verifier imports and Python's own start-up does not — leaving MARK when it is imported."""
    prefix = tmp_path / "python"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2("/usr/bin/python3.11", prefix / "bin" / "python3.11")
    (prefix / "bin" / "python3").symlink_to("python3.11")  # what the install finds first on its PATH
    shutil.copytree("/usr/lib/python3.11", prefix / "lib" / "python3.11", symlinks=True, ignore=_not_needed)
    argparse = prefix / "lib" / "python3.11" / "argparse.py"
    argparse.write_text(f"open({MARK!r}, 'w').close()\n" + argparse.read_text())
    for cached in (prefix / "lib" / "python3.11" / "__pycache__").glob("argparse.*"):
        cached.unlink()
    for path in (tmp_path, prefix):
        path.chmod(0o755)
    if os.path.exists(MARK):
        os.unlink(MARK)
    return prefix / "bin" / "python3.11"


def _not_needed(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in ("test", "idlelib", "tkinter", "ensurepip")]


def refused(verifier: Path, python: Path, *argv: str) -> str:
    """The one line the launcher refuses with, having run nothing of the verifier."""
    done = launch(verifier, *argv, python=str(python))
    assert done.stdout == "", done.stdout
    [line] = done.stderr.splitlines()
    assert done.returncode == (0 if argv[0] == "apt-hook" else 3), done.returncode
    assert not os.path.exists(MARK), "a module the verifier imports ran"
    return line


def test_a_copy_that_is_roots_alone_runs_the_verifier(verifier, python):
    assert subprocess.run([python, "-I", "-S", verifier / "launcher.py", "--interpreter"], capture_output=True).stdout
    done = launch(verifier, "kept", "--state-root", "/nonexistent", python=str(python))
    assert done.returncode == 0 and done.stdout.startswith('{"hostname": '), done.stderr
    assert os.path.exists(MARK)  # the mark works: the verifier imports argparse


UNSAFE = {
    "a standard library directory a group may write": (
        lambda p: (os.chown(p / "lib/python3.11/json", 0, STAFF), (p / "lib/python3.11/json").chmod(0o775)),
        "lib/python3.11/json (owner uid 0, group gid {staff}, mode 775)",
    ),
    "a module another account owns": (
        lambda p: os.chown(p / "lib/python3.11/argparse.py", 65534, 0),
        "lib/python3.11/argparse.py (owner uid 65534, group gid 0, mode 644)",
    ),
    "a compiled extension anyone may write": (
        lambda p: next((p / "lib/python3.11/lib-dynload").glob("_json.*.so")).chmod(0o757),
        "lib/python3.11/lib-dynload/_json.",
    ),
    "a link in it to a file another account owns": (
        lambda p: _link_to_theirs(p),
        "lib/python3.11/sitecustomize.py -> ",
    ),
    "the binary's directory anyone may write": (
        lambda p: (p / "bin").chmod(0o777),
        "bin (owner uid 0, group gid 0, mode 777)",
    ),
    "the binary another account owns": (
        lambda p: os.chown(p / "bin/python3.11", 65534, 65534),
        "bin/python3.11 (owner uid 65534, group gid 65534, mode 755)",
    ),
    "a directory above it a group may write": (
        lambda p: (os.chown(p, 0, STAFF), p.chmod(0o2775)),
        "python (owner uid 0, group gid {staff}, mode 2775)",
    ),
}


def _link_to_theirs(prefix: Path) -> None:
    theirs = prefix.parent / "theirs.py"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    link = prefix / "lib/python3.11/sitecustomize.py"
    link.unlink(missing_ok=True)
    link.symlink_to(theirs)


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_an_interpreter_another_account_could_change_runs_nothing_and_says_why_in_one_line(case, verifier, python):
    change, said = UNSAFE[case]
    prefix = python.parents[1]
    change(prefix)
    said = said.format(staff=STAFF)
    for argv, who in (
        (["kept"], "rocm-fleet verifier:"),
        (["strays", "--json"], "rocm-fleet verifier:"),
        (
            ["apt-hook", "--venv", "/v", "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1"],
            "rocm-fleet apt hook:",
        ),
        (["boot-check", "--help"], "rocm-fleet boot check:"),
    ):
        line = refused(verifier, python, *argv)
        assert line.startswith(f"{who} not run - the interpreter {python} is not root's alone: "), line
        assert f"{prefix.parent}/{said}" in line or f"{prefix}/{said}" in line, line
        assert "make it root's and writable by root only (chown root:root, chmod go-w), or reinstall python3" in line
    # The install holds the interpreter to the rule before it compiles anything with it: nothing is left behind.
    top = verifier.parent / f"install-{case.replace(' ', '-')}"
    top.mkdir(mode=0o755)
    partial = top / ".upload.0"
    partial.write_bytes(archive())
    done = run_install(top, partial, str(python))
    assert done.returncode == 3 and "is not root's alone" in done.stderr, done.stderr
    assert os.listdir(top) == [] and not os.path.exists(MARK)


def test_it_must_be_started_with_minus_i_and_minus_s(verifier, python):
    for flags in (["-I"], ["-S"], []):
        done = subprocess.run(
            [python, *flags, verifier / "launcher.py", "kept"], capture_output=True, text=True, cwd="/"
        )
        assert done.returncode == 3 and not os.path.exists(MARK)
        assert "was not started as python3 -I -S (isolated, no site module)" in done.stderr


def test_minus_s_keeps_the_site_directories_and_their_pth_files_out(python):
    """Debian's site module adds PREFIX/local/lib/python3.X/dist-packages (on older installs root:staff 2775, which
    staff may write): a .pth file there runs at every start — but not under -S, which the launcher requires."""
    site = python.parents[1] / "local" / "lib" / "python3.11" / "dist-packages"
    site.mkdir(parents=True)
    os.chown(site, 0, STAFF)
    site.chmod(0o2775)
    (site / "planted.pth").write_text(f"import os; open({MARK!r}, 'w').close()\n")
    paths = subprocess.run([python, "-I", "-S", "-c", "import sys; print(sys.path)"], capture_output=True, text=True)
    assert "dist-packages" not in paths.stdout and not os.path.exists(MARK)
    subprocess.run([python, "-I", "-c", "pass"], check=True)
    assert os.path.exists(MARK)  # without -S it would have run


def test_the_apt_hook_and_the_boot_unit_run_the_launcher_with_minus_i_minus_s():
    question = Question(Path("/opt/rocm-fleet/venv"), "7.2.4", "0.50.1")
    settings, problems = check_data("ws1", {})
    assert problems == ()
    arguments = boot_check_arguments(check_arguments(settings))  # the unit's own: its time limit is read from them
    for text in (script_text("/usr/bin/python3", question), unit_text("/usr/bin/python3", arguments)):
        runs = re.findall(rf"/usr/bin/python3((?: -\w+)*) {re.escape(LAUNCHER)} ", text)
        assert runs == [" -I -S"], text
