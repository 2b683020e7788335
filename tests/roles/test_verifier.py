"""roles/verifier.py and verify/launcher.py: the verifier installed on a host as one root-owned, byte-compiled version
with a manifest, run by a bare system python3 (no pyelftools there), reproducible from the checkout, never from a file
another account could plant on the controller, and held to the launcher's rule before every run — a version that is
changed, added to, partly missing, or writable by another account is never run.

The installs here are the host's own install script run for real (tests/support/installed_verifier.py)."""

from __future__ import annotations

import hashlib
import io
import json
import marshal
import os
import subprocess
import tarfile

import pytest

from roles import verifier
from tests.support.installed_verifier import SYSTEM_PYTHON3, install, launch, run_install, version

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the verifier is root's only")]


def test_the_bundle_is_reproducible_and_complete_and_its_name_is_its_sources():
    first, second = verifier._tar_gz(verifier._sources()), verifier.archive()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as opened:
        files = {member.name: opened.extractfile(member).read() for member in opened if member.isfile()}
    assert {
        "verify/launcher.py",
        "verify/cli.py",
        "verify/debian/strays.py",
        "verify/report/report_schema.json",
        "verify/checks/runtime_probe.py",
        "verify/stack/releases/7.2.4.json",
        "elftools/elf/elffile.py",
    } <= set(files)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)
    lines = [f"{hashlib.sha256(files[name]).hexdigest()}  {name}" for name in sorted(files)]
    assert verifier.version() == hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()
    assert verifier.launcher_sha256() == hashlib.sha256(files["verify/launcher.py"]).hexdigest()


@pytest.fixture(scope="module")
def top(tmp_path_factory):
    return install(tmp_path_factory.mktemp("host") / "verifier")


def test_installed_it_runs_with_the_bare_system_python3_and_reads_its_data_files_from_itself(top):
    probe = subprocess.run([SYSTEM_PYTHON3, "-I", "-c", "import elftools"], capture_output=True, text=True)
    assert probe.returncode != 0, "the system python must lack pyelftools, or this test proves nothing"
    assert sorted(os.listdir(top)) == sorted([version(), "current", "launcher.py"])
    assert os.readlink(top / "current") == version()
    compiled = top / version() / "verify" / "checks" / "__pycache__"
    assert list(compiled.glob("host.cpython-311.pyc"))
    done = launch(top, "--version", version(), "--help")
    assert done.returncode == 0 and "strays" in done.stdout, done.stderr
    done = launch(top, "strays", "--json")  # the current version
    assert done.returncode in (0, 1) and json.loads(done.stdout)["schema"] == "verify.strays/1", done.stderr
    # Package data through importlib.resources, from the version's own directory.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from verify.report.report import load_schema\n"
        "from verify.checks.runtime import probe_source\n"
        "from verify.stack.rocm_release import known_releases, rocm_release\n"
        "import verify.report.report as r\n"
        "assert r.__file__.startswith(sys.argv[1]), r.__file__\n"
        "print(load_schema()['title'], '|', probe_source().splitlines()[0], '|', known_releases(), "
        "rocm_release('7.2.4').build)"
    )
    done = subprocess.run(
        [SYSTEM_PYTHON3, "-I", "-S", "-B", "-c", code, str(top / version())], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('rocm-fleet verification report | """') and "('7.2.4',) 70204" in done.stdout
    assert launch(top, "--check", str(top / version()), version()).stdout == "intact\n"


def _break_cli(root):
    """verify/cli.py and its compiled module changed so that running it leaves a mark, their manifest lines left."""
    mark = "open('/tmp/rocm-fleet-test-ran', 'w').close()\n"
    (root / "verify" / "cli.py").write_text(mark)
    compiled = next((root / "verify" / "__pycache__").glob("cli.*.pyc"))
    compiled.write_bytes(compiled.read_bytes()[:16] + marshal.dumps(compile(mark, "cli.py", "exec")))


def _cli_and_manifest(root):
    """The same change, and the manifest rewritten to match it: the sources no longer hash to the version's name."""
    _break_cli(root)
    lines = (root / "MANIFEST").read_text().splitlines()
    fixed = [f"{hashlib.sha256((root / line[66:]).read_bytes()).hexdigest()}  {line[66:]}" for line in lines]
    (root / "MANIFEST").write_text("".join(line + "\n" for line in fixed))


BREAKS = {
    "a module changed": (_break_cli, "is not the file its MANIFEST lists"),
    "a module changed, and its manifest line with it": (_cli_and_manifest, "does not hold version"),
    "a module added beside the standard library's names": (
        lambda root: (root / "json.py").write_text("open('/tmp/rocm-fleet-test-ran', 'w').close()\n"),
        "holds other files than its MANIFEST lists",
    ),
    "a compiled module missing": (
        lambda root: next((root / "verify" / "__pycache__").glob("cli.*.pyc")).unlink(),
        "holds other files than its MANIFEST lists",
    ),
    "a symbolic link in place of a module": (
        lambda root: ((root / "verify" / "cli.py").unlink(), (root / "verify" / "cli.py").symlink_to("/etc/hostname")),
        "not a regular file or directory",
    ),
    "a module another account may write": (lambda root: (root / "verify" / "cli.py").chmod(0o666), "not root's alone"),
    "a directory of another account's": (lambda root: os.chown(root / "elftools", 1000, 1000), "not root's alone"),
    "the version's directory writable by its group": (
        lambda root: root.chmod(0o775),
        "is not a directory only root can change",
    ),
    "the verifier's directory writable by everyone, even sticky": (
        lambda root: root.parent.chmod(0o1777),
        "is not a directory only root can change",
    ),
    "the manifest gone": (lambda root: (root / "MANIFEST").unlink(), "has no MANIFEST"),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_version_that_breaks_the_rule_is_never_run_and_says_why_in_one_line(case, tmp_path):
    top = install(tmp_path / "verifier")
    marker = "/tmp/rocm-fleet-test-ran"
    if os.path.exists(marker):
        os.unlink(marker)
    change, said = BREAKS[case]
    change(top / version())
    for argv, status, prefix in (
        (["strays", "--json"], 3, "rocm-fleet verifier:"),
        (["--version", version(), "check", "--help"], 3, "rocm-fleet verifier:"),
        (["apt-hook", "--venv", "/v"], 0, "rocm-fleet apt hook:"),  # it never fails apt
        (["boot-check", "--help"], 3, "rocm-fleet boot check:"),
    ):
        done = launch(top, *argv)
        assert (done.returncode, done.stdout) == (status, ""), done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"{prefix} not run - ") and said in line, line
        assert line.endswith("run the deploy (or tasks/verify.py) again")
    assert not os.path.exists(marker)
    found = launch(top, "--check", str(top / version()), version())
    assert found.returncode == 3 and said in found.stderr


def test_no_current_version_and_an_unknown_version_are_refused(tmp_path):
    top = install(tmp_path / "verifier")
    done = launch(top, "--version", "0" * 64, "strays")
    assert done.returncode == 3 and f"{top / ('0' * 64)}: No such file or directory" in done.stderr
    (top / "current").unlink()
    done = launch(top, "strays")
    assert done.returncode == 3 and "no verifier version is installed" in done.stderr


def test_the_install_replaces_a_damaged_version_keeps_the_one_current_before_and_removes_older_ones(tmp_path):
    top = install(tmp_path / "verifier")
    older, previous = "1" * 64, "2" * 64
    for name in (older, previous):
        (top / name).mkdir()
    (top / "current").unlink()
    (top / "current").symlink_to(previous)
    (top / ".install.left-by-a-killed-run").mkdir()
    (top / ".upload.left-by-a-killed-run").write_bytes(b"x")
    os.utime(top / ".upload.left-by-a-killed-run", (0, 0))  # long ago: not another run's, waiting for the lock
    (top / ".upload.of-a-run-waiting-for-the-lock").write_bytes(b"y")
    (top / version() / "verify" / "cli.py").write_text("broken\n")
    install(top, token="1" * 32)
    assert sorted(os.listdir(top)) == sorted(
        [version(), previous, "current", "launcher.py", ".upload.of-a-run-waiting-for-the-lock"]
    )
    assert os.readlink(top / "current") == version()
    assert launch(top, "--check", str(top / version()), version()).stdout == "intact\n"


def test_an_archive_that_arrived_changed_is_removed_and_nothing_else_is_touched(tmp_path):
    top = install(tmp_path / "verifier")
    before = sorted(os.listdir(top))
    partial = top / f".upload.{'3' * 32}"
    partial.write_bytes(verifier.archive()[:-1])
    done = run_install(top, partial, token="3" * 32)
    assert done.returncode == 1 and done.stderr.strip().startswith("rocm-fleet: the upload of")
    assert sorted(os.listdir(top)) == before and not partial.exists()


def test_callers_run_the_launcher_only_when_it_is_this_checkouts(tmp_path):
    """verifier_command, as the stages, the apt hook, the boot unit and the status task run it (sh -c): a missing
    launcher and one of another checkout's are one line and exit status 3, and nothing of them runs."""
    top = tmp_path / "verifier"
    command = verifier.verifier_command("strays", "--json").replace(verifier.TOP, str(top))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == verifier.not_installed_line().replace(verifier.TOP, str(top)) + "\n"
    install(top)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert done.returncode in (0, 1) and json.loads(done.stdout)["schema"] == "verify.strays/1", done.stderr
    marker = tmp_path / "ran"
    (top / "launcher.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == verifier.stale_line().replace(verifier.TOP, str(top)) + "\n"
    assert not marker.exists()


@pytest.mark.slow
def test_a_verifier_planted_in_the_controllers_temporary_directory_is_not_installed(tmp_path, monkeypatch):
    """For real: pyinfra installs the verifier in a Debian 12 root (@chroot) while another account has planted files
    in the controller's TMPDIR under names anyone can compute (the build is reproducible). The host gets the version
    built from this checkout, nothing is read from or written to the shared temporary directory, and a second run
    changes nothing."""
    from tests.support.chroot_hosts import chroot_host, run_pyinfra
    from tests.support.debian_roots import image

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))  # the pyinfra process's tempfile.gettempdir()
    planted = shared / f"rocm-fleet-{os.getuid()}" / f"verifier-{version()[:16]}.tar.gz"
    planted.parent.mkdir(mode=0o700)
    planted.write_bytes(b"planted by another account")
    with chroot_host(image("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0")), tmp_path / "host") as root:
        run = run_pyinfra(root, "tasks/strays.py", {})
        assert run.returncode == 0, run.explain()
        installed = root / "var/lib/rocm-fleet/verifier"
        assert os.readlink(installed / "current") == version()
        assert (installed / "launcher.py").read_bytes() == (
            verifier.Path(verifier.verify.__file__).parent / "launcher.py"
        ).read_bytes()
        again = run_pyinfra(root, "tasks/strays.py", {})
        assert again.returncode == 0 and again.changed_operations == [], again.explain()
    assert sorted(str(path.relative_to(shared)) for path in shared.rglob("*")) == [
        planted.parent.name,
        str(planted.relative_to(shared)),
    ]
