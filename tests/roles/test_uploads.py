"""roles/uploads.py: what the private, checked upload yields (facts in, commands out, as tests/support/operation_cases
does), and its host-side check run for real. Its run over real SSH with sudo, with a planted pyinfra temporary file,
is in tests/tasks/test_root_never_runs_the_owners_code.py."""

from __future__ import annotations

import datetime
import hashlib
import os
import shlex
import subprocess

from pyinfra.api import FileUploadCommand, StringCommand

from roles import uploads
from roles.uploads import FilesFound, FilesSha256, Upload, checked_files, install_commands, record_again_command
from tests.support.operation_cases import run_fact_here, run_operation

DATA = b"the verifier\n"
SHA = hashlib.sha256(DATA).hexdigest()
TOKEN = "0" * 32


def test_nothing_to_do_when_every_file_has_its_sha256():
    commands, host = run_operation(
        checked_files,
        {"FilesSha256": [f"{SHA}  verify.pyz"], "FileNames": ["verify.pyz"]},
        directory="/var/lib/rocm-fleet",
        uploads=[Upload("verify.pyz", SHA, DATA)],
        delete=True,
    )
    assert commands == []
    assert host.noops == ["1 file(s) in /var/lib/rocm-fleet with the controller's sha256"]


def test_a_changed_file_goes_through_a_private_staging_directory(monkeypatch):
    monkeypatch.setattr(uploads, "_token", lambda: TOKEN)
    commands, _ = run_operation(
        checked_files,
        {"FilesSha256": ["0" * 64 + "  verify.pyz"], "FileNames": ["verify.pyz", "old.whl"]},
        directory="/var/lib/rocm-fleet",
        uploads=[Upload("verify.pyz", SHA, DATA)],
        delete=True,
    )
    staging = f"/tmp/rocm-fleet-upload-{TOKEN}"
    partial = f"/var/lib/rocm-fleet/.verify.pyz.{TOKEN}"
    assert commands[0] == "mkdir -p -- /var/lib/rocm-fleet && chmod 755 -- /var/lib/rocm-fleet"
    assert commands[1] == f"mkdir -m 700 {staging}"
    assert commands[2].startswith("FileUploadCommand(") and commands[2].endswith(f", {partial})")
    assert commands[3] == (
        f"if echo '{SHA}  {partial}' | sha256sum --check --status; then chmod 644 {partial} && "
        f"mv -f {partial} /var/lib/rocm-fleet/verify.pyz"
        f"{uploads._record('/var/lib/rocm-fleet', Upload('verify.pyz', SHA, DATA), TOKEN)}; "
        f"else rm -f {partial}; "
        f"echo {shlex.quote(uploads.mismatch_line('/var/lib/rocm-fleet/verify.pyz', SHA))} >&2; "
        "false; fi"
    )
    assert commands[4:] == [f"rm -rf {staging}", "rm -f /var/lib/rocm-fleet/old.whl"]


def test_the_staging_directory_is_the_login_accounts_and_the_upload_avoids_pyinfras_temporary_name():
    made, upload, check, removed = install_commands("/d", [Upload("f", SHA, DATA)], "644", TOKEN)
    # As the login account whatever the operation's _sudo (SFTP writes as that account), and pyinfra's sudo upload
    # goes through the private directory, not <TMPDIR>/pyinfra-<sha1 of the destination>.
    assert isinstance(made, StringCommand) and made.connector_arguments == {"_sudo": False}
    assert isinstance(removed, StringCommand) and removed.connector_arguments == {"_sudo": False}
    assert isinstance(upload, FileUploadCommand)
    assert upload.remote_temp_filename == f"/tmp/rocm-fleet-upload-{TOKEN}/0"
    assert upload.src.read() == DATA


def test_a_file_that_arrived_changed_is_removed_and_fails_with_one_line(tmp_path):
    (tmp_path / f".f.{TOKEN}").write_bytes(DATA + b"tampered")
    _, _, check, _ = install_commands(str(tmp_path), [Upload("f", SHA, DATA)], "644", TOKEN)
    done = subprocess.run(["sh", "-c", check], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.splitlines() == [uploads.mismatch_line(str(tmp_path / "f"), SHA)]
    assert list(tmp_path.iterdir()) == []
    (tmp_path / f".f.{TOKEN}").write_bytes(DATA)
    done = subprocess.run(["sh", "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [uploads.SHA256_RECORD, "f"]
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_sha256_fact_reads_regular_files_only(tmp_path):
    (tmp_path / "a").write_bytes(DATA)
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "c").mkdir()
    found = run_fact_here(FilesSha256, directory=str(tmp_path), names=["a", "b", "c", "missing"])
    assert found.sha256 == {"a": SHA}
    assert run_fact_here(FilesSha256, directory=str(tmp_path / "nothing"), names=["a"]) == FilesFound({}, {})


def _put_in_place(directory, name: str, data: bytes) -> None:
    """The host-side part of an upload, for real: the file arrives under its temporary name, is checked and put in
    place (and its sha256 recorded)."""
    (directory / f".{name}.{TOKEN}").write_bytes(data)
    _, _, check, _ = install_commands(
        str(directory), [Upload(name, hashlib.sha256(data).hexdigest(), data)], "644", TOKEN
    )
    done = subprocess.run(["sh", "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_file_put_in_place_is_not_hashed_again_while_its_stat_is_unchanged(tmp_path):
    """Issue 12: every no-op run hashed the whole wheelhouse on every host (GBs). The sha256 recorded when a file was
    put in place is taken while its size, inode and ctime are unchanged; any change to the file makes it hashed."""
    _put_in_place(tmp_path, "verify.pyz", DATA)
    _put_in_place(tmp_path, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", b"a wheel")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        uploads.SHA256_RECORD,
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "verify.pyz",
    ]
    names = ["verify.pyz", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=names) == FilesFound(
        {"verify.pyz": SHA, names[1]: hashlib.sha256(b"a wheel").hexdigest()}, {}
    )

    # The record is what is read: put another sha256 into it, the stat unchanged, and the fact reports that one.
    record = tmp_path / uploads.SHA256_RECORD
    record.write_text(record.read_text().replace(SHA, "f" * 64))
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]).sha256 == {"verify.pyz": "f" * 64}

    # Any change to the file changes its ctime: then it is hashed (and the stat it was hashed at is said).
    (tmp_path / "verify.pyz").chmod(0o600)
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]) == FilesFound(
        {"verify.pyz": SHA}, {"verify.pyz": _stat_key(tmp_path / "verify.pyz")}
    )
    with open(tmp_path / "verify.pyz", "ab") as appended:
        appended.write(b"more")
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]).sha256 == {
        "verify.pyz": hashlib.sha256(DATA + b"more").hexdigest()
    }


def test_a_record_that_is_not_a_regular_file_is_not_read(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    record = tmp_path / uploads.SHA256_RECORD
    record.rename(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text((tmp_path / "elsewhere").read_text().replace(SHA, "f" * 64))
    record.symlink_to(tmp_path / "elsewhere")
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]).sha256 == {"verify.pyz": SHA}


def test_putting_a_file_again_replaces_its_record_line(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    _put_in_place(tmp_path, "verify.pyz", DATA + b"v2")
    lines = (tmp_path / uploads.SHA256_RECORD).read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [[hashlib.sha256(DATA + b"v2").hexdigest(), "verify.pyz"]]


def test_the_record_is_kept_when_other_files_are_deleted():
    commands, host = run_operation(
        checked_files,
        {"FilesSha256": [f"{SHA}  verify.pyz"], "FileNames": ["verify.pyz", uploads.SHA256_RECORD]},
        directory="/var/lib/rocm-fleet",
        uploads=[Upload("verify.pyz", SHA, DATA)],
        delete=True,
    )
    assert commands == []


def _stat_key(path) -> str:
    """Python's own view of what `stat -c '%s %i %z %y'` prints: size, inode, ctime and mtime in local time, ns."""
    st = os.stat(path)

    def when(ns: int) -> str:
        moment = datetime.datetime.fromtimestamp(ns // 10**9).astimezone()
        return f"{moment:%Y-%m-%d %H:%M:%S}.{ns % 10**9:09d} {moment:%z}"

    return f"{st.st_size} {st.st_ino} {when(st.st_ctime_ns)} {when(st.st_mtime_ns)}"


KEY = "13 2180487 2026-12-01 23:09:42.533948275 +0000 2026-12-01 23:09:42.533948275 +0000"


def test_a_file_hashed_again_and_found_equal_is_recorded_again(monkeypatch):
    """Issue 12: a file whose ctime changed (a chmod, a hard link) was hashed, found equal — and hashed again on every
    later run, because nothing rewrote its record line. The operation now rewrites it (and says so)."""
    monkeypatch.setattr(uploads, "_token", lambda: TOKEN)
    upload = Upload("verify.pyz", SHA, DATA)
    commands, host = run_operation(
        checked_files,
        {"FilesSha256": [f"{SHA}  verify.pyz", f"hashed {KEY}\tverify.pyz"], "FileNames": ["verify.pyz"]},
        directory="/var/lib/rocm-fleet",
        uploads=[upload],
    )
    assert commands == [
        "tell: 1 file(s) in /var/lib/rocm-fleet hashed (their stat was not the recorded one) and found with the "
        "controller's sha256: recording it in .rocm-fleet-sha256, so later runs do not hash them again",
        record_again_command("/var/lib/rocm-fleet", [(upload, KEY)], TOKEN),
    ]
    assert host.noops == []


def test_a_hashed_file_that_differs_is_uploaded_and_a_name_that_cannot_be_recorded_is_left(monkeypatch):
    monkeypatch.setattr(uploads, "_token", lambda: TOKEN)
    upload = Upload("verify.pyz", SHA, DATA)
    commands, _ = run_operation(
        checked_files,
        {"FilesSha256": ["0" * 64 + "  verify.pyz", f"hashed {KEY}\tverify.pyz"], "FileNames": ["verify.pyz"]},
        directory="/d",
        uploads=[upload],
    )
    # Uploaded again (its own check writes the record), not recorded as it is.
    assert commands[0] == "mkdir -p -- /d && chmod 755 -- /d" and commands[2].startswith("FileUploadCommand(")
    assert record_again_command("/d", [(upload, KEY)], TOKEN) not in commands
    commands, host = run_operation(
        checked_files,
        {"FilesSha256": [f"{SHA}  odd name", f"hashed {KEY}\todd name"], "FileNames": ["odd name"]},
        directory="/d",
        uploads=[Upload("odd name", SHA, DATA)],
    )
    assert commands == [] and host.noops == ["1 file(s) in /d with the controller's sha256"]


def test_the_fact_says_the_stat_a_file_was_hashed_at_and_nothing_for_a_recorded_one(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]).hashed == {}
    (tmp_path / "verify.pyz").chmod(0o644)  # the same mode: only the ctime changes
    found = run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"])
    assert found == FilesFound({"verify.pyz": SHA}, {"verify.pyz": _stat_key(tmp_path / "verify.pyz")})
    # A key of another shape, or for a name with no sha256 line, is not taken from the output.
    assert FilesSha256().process([f"{SHA}  a", "hashed 1 2 yesterday\ta", f"hashed {KEY}\tb"]) == FilesFound(
        {"a": SHA}, {}
    )


def test_recording_again_for_real_stops_the_hashing_and_a_file_changed_meanwhile_is_not_recorded(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    _put_in_place(tmp_path, "b.whl", b"a wheel")
    for name in ("verify.pyz", "b.whl"):
        (tmp_path / name).chmod(0o644)
    found = run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz", "b.whl"])
    assert set(found.hashed) == {"verify.pyz", "b.whl"}
    # b.whl changes after it was hashed: its line is not written (it is hashed again next time).
    with open(tmp_path / "b.whl", "ab") as appended:
        appended.write(b"!")
    uploads_hashed = [
        (Upload("verify.pyz", SHA, DATA), found.hashed["verify.pyz"]),
        (Upload("b.whl", hashlib.sha256(b"a wheel").hexdigest(), b"a wheel"), found.hashed["b.whl"]),
    ]
    done = subprocess.run(
        ["sh", "-c", record_again_command(str(tmp_path), uploads_hashed, TOKEN)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [uploads.SHA256_RECORD, "b.whl", "verify.pyz"]
    assert (tmp_path / uploads.SHA256_RECORD).read_text() == f"{SHA} verify.pyz {_stat_key(tmp_path / 'verify.pyz')}\n"
    again = run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz", "b.whl"])
    assert again == FilesFound(
        {"verify.pyz": SHA, "b.whl": hashlib.sha256(b"a wheel!").hexdigest()}, {"b.whl": _stat_key(tmp_path / "b.whl")}
    )


def test_the_fact_in_one_pass_takes_each_recorded_file_and_hashes_the_rest(tmp_path):
    """One stat and one awk for every recordable name: a file whose record line has its stat is taken from the
    record, any other is hashed — also with an empty record, and a name the record cannot hold (a space) always."""
    _put_in_place(tmp_path, "a.whl", b"a")
    _put_in_place(tmp_path, "b.whl", b"b")
    (tmp_path / "c.whl").write_bytes(b"c")  # never recorded
    (tmp_path / "odd name").write_bytes(b"odd")
    record = tmp_path / uploads.SHA256_RECORD
    record.write_text(record.read_text().replace(hashlib.sha256(b"a").hexdigest(), "f" * 64))  # read, not hashed
    (tmp_path / "b.whl").chmod(0o644)
    names = ["a.whl", "b.whl", "c.whl", "odd name", "missing.whl"]
    sha = {
        name: hashlib.sha256(data).hexdigest()
        for name, data in (("a.whl", b"a"), ("b.whl", b"b"), ("c.whl", b"c"), ("odd name", b"odd"))
    }
    found = run_fact_here(FilesSha256, directory=str(tmp_path), names=names)
    assert found == FilesFound(
        {**sha, "a.whl": "f" * 64}, {name: _stat_key(tmp_path / name) for name in ("b.whl", "c.whl", "odd name")}
    )
    record.write_text("")
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=names) == FilesFound(
        sha, {name: _stat_key(tmp_path / name) for name in sha}
    )
