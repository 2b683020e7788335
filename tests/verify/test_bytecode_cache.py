"""verify/bytecode_cache.py: the archive's compiled code kept by root beside it, run for real.

The archive is the one the deploy uploads (roles/verifier.py zipapp_bytes), run by this machine's bare python3 as the
host runs it (`python3 -I -S verify.pyz …`), as root and as `nobody`. Whether an entry is used is seen, not timed: a
planted entry whose code prints FROM CACHE shows which entries a run takes (bench/verifier_imports.py measures the
time it saves).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from roles.verifier import zipapp_bytes
from tests.support.host_pythons import OTHER_PYTHONS, interpreter

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the cache is root's only")]

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
NOBODY = 65534
PLANTED = "FROM CACHE"
# Run by the python3 under test: an entry as the cache writes one (magic number + marshalled code), for `filename`.
WRITE_ENTRY = (
    "import importlib.util, marshal, sys\n"
    "path, filename, body = sys.argv[1:]\n"
    "code = compile(body, filename, 'exec', dont_inherit=True)\n"
    "open(path, 'wb').write(importlib.util.MAGIC_NUMBER + marshal.dumps(code))\n"
)


def host_dir(tmp_path: Path, mode: int = 0o755, archive: bytes | None = None) -> Path:
    directory = tmp_path / "rocm-fleet"
    directory.mkdir()
    directory.chmod(mode)
    (directory / "verify.pyz").write_bytes(zipapp_bytes() if archive is None else archive)
    (directory / "verify.pyz").chmod(0o644)
    return directory


def run(directory: Path, *flags: str, user: int | None = None, python: str = PYTHON3) -> subprocess.CompletedProcess:
    """`python3 -I -S [flags] verify.pyz ldd /bin/true`: imports the CLI, the loader model and pyelftools."""
    done = subprocess.run(
        [python, "-I", "-S", *flags, str(directory / "verify.pyz"), "ldd", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        user=user,
        group=user,
        extra_groups=[] if user is not None else None,
    )
    assert done.returncode == 0, done.stderr
    return done


def entry_of(directory: Path, module: str, tag: str = "cpython-") -> Path:
    found = [path for path in (directory / "bytecode").iterdir() if path.name.startswith(f"{module}.{tag}")]
    assert len(found) == 1, found
    return found[0]


def plant(
    path: Path, directory: Path, module_file: str = "verify/cli.py", mode: int = 0o600, python: str = PYTHON3
) -> None:
    """Write an entry at `path` whose code prints PLANTED and ends the run, named for the archive's `module_file`
    (an entry of `python`'s: its magic number)."""
    filename = f"{directory / 'verify.pyz'}/{module_file}"
    subprocess.run(
        [python, "-c", WRITE_ENTRY, str(path), filename, f"print({PLANTED!r}); raise SystemExit(0)"],
        check=True,
        timeout=60,
    )
    path.chmod(mode)


def test_the_first_run_keeps_each_module_compiled_and_the_next_runs_take_them(tmp_path):
    directory = host_dir(tmp_path)
    first = run(directory)
    assert "libc.so.6" in first.stdout
    cache = directory / "bytecode"
    assert (cache.stat().st_mode & 0o777, cache.stat().st_uid) == (0o700, 0)
    names = {path.name.split(".cpython-")[0] for path in cache.iterdir()}
    assert {"verify.cli", "verify.commands.ldd", "verify.ld.elf", "elftools.elf.structs"} <= names
    assert all((path.stat().st_mode & 0o777, path.stat().st_uid) == (0o600, 0) for path in cache.iterdir())
    second = run(directory)
    assert (second.stdout, second.stderr) == (first.stdout, first.stderr)
    plant(entry_of(directory, "verify.cli"), directory)
    assert run(directory).stdout.strip() == PLANTED  # the entry is what runs


def _changed(archive: bytes, member: str, tail: bytes) -> bytes:
    """The archive with `tail` appended to one member, written as roles/verifier.py writes its members."""
    source, out = zipfile.ZipFile(io.BytesIO(archive)), io.BytesIO()
    out.write(archive[: archive.index(b"PK")])  # the #! line
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as changed:
        for info in source.infolist():
            data = source.read(info)
            changed.writestr(info, data + tail if info.filename == member else data)
    return out.getvalue()


def test_a_new_archive_never_runs_the_code_of_the_old_one(tmp_path):
    directory = host_dir(tmp_path)
    run(directory)
    old = entry_of(directory, "verify.cli")
    plant(old, directory)
    (directory / "verify.pyz").write_bytes(_changed(zipapp_bytes(), "verify/cli.py", b"\n# another checkout\n"))
    done = run(directory)
    assert PLANTED not in done.stdout and "libc.so.6" in done.stdout
    assert len([p for p in (directory / "bytecode").iterdir() if p.name.startswith("verify.cli.")]) == 2


@pytest.mark.parametrize(
    "case", ["directory writable by all", "directory of another account", "run as nobody", "python3 -B"]
)
def test_nothing_is_written_where_another_account_could_have_written_it_or_when_asked_not_to(tmp_path, case, request):
    if case == "run as nobody":  # pytest's own directories are root's only: one nobody can reach
        tmp_path = Path(tempfile.mkdtemp(prefix="bytecode-cache-"))
        request.addfinalizer(lambda: shutil.rmtree(tmp_path))
        tmp_path.chmod(0o755)
    directory = host_dir(tmp_path, mode=0o777 if case == "directory writable by all" else 0o755)
    if case == "directory of another account":
        os.chown(directory, NOBODY, NOBODY)
    done = run(directory, *(["-B"] if case == "python3 -B" else []), user=NOBODY if case == "run as nobody" else None)
    assert "libc.so.6" in done.stdout
    cache = directory / "bytecode"
    if case == "python3 -B":
        assert cache.is_dir() and not list(cache.iterdir())
    else:
        assert not cache.exists()


def _symlinked(entry: Path, directory: Path) -> None:
    target = directory / "elsewhere"
    plant(target, directory)
    entry.unlink()
    entry.symlink_to(target)


TAMPERED = {
    "cache directory readable by others": lambda entry, d: (plant(entry, d), entry.parent.chmod(0o755)),
    "cache directory of another account": lambda entry, d: (plant(entry, d), os.chown(entry.parent, NOBODY, NOBODY)),
    "entry of another account": lambda entry, d: (plant(entry, d), os.chown(entry, NOBODY, NOBODY)),
    "entry readable by others": lambda entry, d: plant(entry, d, mode=0o644),
    "entry is a symbolic link": _symlinked,
    "entry for another file": lambda entry, d: plant(entry, d, module_file="verify/safe_read.py"),
    "entry of another python": lambda entry, d: (
        plant(entry, d),
        entry.write_bytes(b"\x00\x00\r\n" + entry.read_bytes()[4:]),
    ),
    "entry cut short": lambda entry, d: (plant(entry, d), entry.write_bytes(entry.read_bytes()[:30])),
    "entry is a FIFO": lambda entry, d: (entry.unlink(), os.mkfifo(entry, 0o600)),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_an_entry_that_is_not_roots_own_whole_code_for_that_module_is_never_run(tmp_path, case):
    directory = host_dir(tmp_path)
    run(directory)
    TAMPERED[case](entry_of(directory, "verify.cli"), directory)
    done = run(directory)
    assert PLANTED not in done.stdout and "libc.so.6" in done.stdout


def test_a_cache_grown_past_its_bound_is_emptied_before_the_next_write(tmp_path):
    """Each new archive adds its entries beside the old ones; past MAX_ENTRIES files the directory is emptied first,
    so a host that has seen many deploys does not keep every one."""
    from verify.bytecode_cache import MAX_ENTRIES

    directory = host_dir(tmp_path)
    cache = directory / "bytecode"
    cache.mkdir(mode=0o700)
    for index in range(MAX_ENTRIES):
        (cache / f"verify.old{index}.cpython-311.0-0").write_bytes(b"")
    run(directory)
    left = sorted(path.name for path in cache.iterdir())
    assert left and not any(name.startswith("verify.old") for name in left), left[:5]
    assert len(left) < MAX_ENTRIES
    entry_of(directory, "verify.cli")  # and the run's own entries are there


@pytest.mark.parametrize("version", sorted(OTHER_PYTHONS))
def test_each_hosts_python3_keeps_its_own_entries_beside_the_others_and_takes_only_its_own(tmp_path, version):
    """Ubuntu 22.04's 3.10, 24.04's 3.12, 3.13 (tests/support/host_pythons.py) beside this machine's 3.11."""
    directory = host_dir(tmp_path)
    pythons = {version: interpreter(version), "3.11": PYTHON3}
    first = {v: run(directory, python=python).stdout for v, python in pythons.items()}
    assert first[version] == first["3.11"] and "libc.so.6" in first["3.11"]
    tags = {v: f"cpython-{v.replace('.', '')}." for v in pythons}
    entries = list((directory / "bytecode").iterdir())
    kept = {v: {p.name.split(f".{tag}")[0] for p in entries if f".{tag}" in p.name} for v, tag in tags.items()}
    assert kept[version] == kept["3.11"] and {"verify.cli", "elftools.elf.structs"} <= kept[version]
    assert len(entries) == 2 * len(kept["3.11"])  # nothing but the two interpreters' entries
    plant(entry_of(directory, "verify.cli", tags[version]), directory, python=pythons[version])
    assert run(directory, python=pythons[version]).stdout.strip() == PLANTED
    assert run(directory).stdout == first["3.11"]  # another interpreter's entry is never taken
