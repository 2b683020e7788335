"""roles/uploads.py: what the private, checked upload yields (facts in, commands out, as tests/support/operation_cases
does), and its host-side check run for real. Its run over real SSH with sudo, with a planted pyinfra temporary file,
is in tests/tasks/test_root_never_runs_the_owners_code.py."""

from __future__ import annotations

import hashlib
import shlex
import subprocess

from pyinfra.api import FileUploadCommand, StringCommand

from roles import uploads
from roles.uploads import FilesSha256, Upload, checked_files, install_commands
from tests.support.operation_cases import run_fact_here, run_operation

DATA = b"the verifier\n"
SHA = hashlib.sha256(DATA).hexdigest()
TOKEN = "0" * 32


def test_nothing_to_do_when_every_file_has_its_sha256():
    commands, host = run_operation(checked_files, {"FilesSha256": [f"{SHA}  verify.pyz"], "FileNames": ["verify.pyz"]},
                                   directory="/var/lib/rocm-fleet", uploads=[Upload("verify.pyz", SHA, DATA)],
                                   delete=True)
    assert commands == []
    assert host.noops == ["1 file(s) in /var/lib/rocm-fleet with the controller's sha256"]


def test_a_changed_file_goes_through_a_private_staging_directory(monkeypatch):
    monkeypatch.setattr(uploads, "_token", lambda: TOKEN)
    commands, _ = run_operation(checked_files, {"FilesSha256": ["0" * 64 + "  verify.pyz"],
                                                "FileNames": ["verify.pyz", "old.whl"]},
                                directory="/var/lib/rocm-fleet", uploads=[Upload("verify.pyz", SHA, DATA)],
                                delete=True)
    staging = f"/tmp/rocm-fleet-upload-{TOKEN}"
    partial = f"/var/lib/rocm-fleet/.verify.pyz.{TOKEN}"
    assert commands[0] == "mkdir -p -- /var/lib/rocm-fleet && chmod 755 -- /var/lib/rocm-fleet"
    assert commands[1] == f"mkdir -m 700 {staging}"
    assert commands[2].startswith("FileUploadCommand(") and commands[2].endswith(f", {partial})")
    assert commands[3] == (f"if echo '{SHA}  {partial}' | sha256sum --check --status; then chmod 644 {partial} && "
                           f"mv -f {partial} /var/lib/rocm-fleet/verify.pyz"
                           f"{uploads._record('/var/lib/rocm-fleet', Upload('verify.pyz', SHA, DATA), TOKEN)}; "
                           f"else rm -f {partial}; "
                           f"echo {shlex.quote(uploads.mismatch_line('/var/lib/rocm-fleet/verify.pyz', SHA))} >&2; "
                           "false; fi")
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
    assert found == {"a": SHA}
    assert run_fact_here(FilesSha256, directory=str(tmp_path / "nothing"), names=["a"]) == {}


def _put_in_place(directory, name: str, data: bytes) -> None:
    """The host-side part of an upload, for real: the file arrives under its temporary name, is checked and put in
    place (and its sha256 recorded)."""
    (directory / f".{name}.{TOKEN}").write_bytes(data)
    _, _, check, _ = install_commands(str(directory), [Upload(name, hashlib.sha256(data).hexdigest(), data)], "644",
                                      TOKEN)
    done = subprocess.run(["sh", "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_file_put_in_place_is_not_hashed_again_while_its_stat_is_unchanged(tmp_path):
    """Issue 12: every no-op run hashed the whole wheelhouse on every host (GBs). The sha256 recorded when a file was
    put in place is taken while its size, inode and ctime are unchanged; any change to the file makes it hashed."""
    _put_in_place(tmp_path, "verify.pyz", DATA)
    _put_in_place(tmp_path, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", b"a wheel")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        uploads.SHA256_RECORD, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "verify.pyz"]
    names = ["verify.pyz", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=names) == {
        "verify.pyz": SHA, names[1]: hashlib.sha256(b"a wheel").hexdigest()}

    # The record is what is read: put another sha256 into it, the stat unchanged, and the fact reports that one.
    record = tmp_path / uploads.SHA256_RECORD
    record.write_text(record.read_text().replace(SHA, "f" * 64))
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]) == {"verify.pyz": "f" * 64}

    # Any change to the file changes its ctime: then it is hashed.
    (tmp_path / "verify.pyz").chmod(0o600)
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]) == {"verify.pyz": SHA}
    with open(tmp_path / "verify.pyz", "ab") as appended:
        appended.write(b"more")
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]) == {
        "verify.pyz": hashlib.sha256(DATA + b"more").hexdigest()}


def test_a_record_that_is_not_a_regular_file_is_not_read(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    record = tmp_path / uploads.SHA256_RECORD
    record.rename(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text((tmp_path / "elsewhere").read_text().replace(SHA, "f" * 64))
    record.symlink_to(tmp_path / "elsewhere")
    assert run_fact_here(FilesSha256, directory=str(tmp_path), names=["verify.pyz"]) == {"verify.pyz": SHA}


def test_putting_a_file_again_replaces_its_record_line(tmp_path):
    _put_in_place(tmp_path, "verify.pyz", DATA)
    _put_in_place(tmp_path, "verify.pyz", DATA + b"v2")
    lines = (tmp_path / uploads.SHA256_RECORD).read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [[hashlib.sha256(DATA + b"v2").hexdigest(), "verify.pyz"]]


def test_the_record_is_kept_when_other_files_are_deleted():
    commands, host = run_operation(checked_files, {"FilesSha256": [f"{SHA}  verify.pyz"],
                                                   "FileNames": ["verify.pyz", uploads.SHA256_RECORD]},
                                   directory="/var/lib/rocm-fleet", uploads=[Upload("verify.pyz", SHA, DATA)],
                                   delete=True)
    assert commands == []
