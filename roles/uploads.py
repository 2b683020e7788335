"""Files uploaded to a host through a private staging directory and put in place only when their sha256 is the one
the controller computed — for everything root later runs or installs (the verifier's archive, the wheelhouse).

Why not pyinfra's files.put / files.sync: logged in as an admin with sudo, pyinfra 3.10 uploads over SFTP as the
login account to `<TMPDIR>/pyinfra-<sha1 of the destination path>` — a name every account on the host can compute —
and then runs `sudo cp` from it. Another account can plant that name first (a symlink or FIFO with
fs.protected_symlinks/fifos=0, or a file it can rewrite before the copy) and have root install its bytes.
pyinfra's `_temp_dir` global argument only moves the same predictable name elsewhere, and a directory for it
would have to exist before planning ends.

Here, for each upload that is needed:
1. the login account (not root: SFTP writes as that account) makes `/tmp/rocm-fleet-upload-<128 random bits>` with
   `mkdir -m 700` — mkdir fails if the name exists, so it cannot be planted, and nobody else can enter it;
2. pyinfra uploads each file through that directory (`remote_temp_filename`) to a temporary name beside the
   destination, in a root-owned directory;
3. root checks the file's sha256 against the controller's, sets its mode and moves it into place (`mv` in one
   directory: a reader sees the old file or the new one, never half of one); a mismatch removes it and fails the
   host with one line;
4. the staging directory is removed.
Logged in as root (or through @chroot/@local) pyinfra writes the temporary name directly; the checks are the same.

Whether a file is already there is decided by its sha256 — without hashing it again on every run: step 3 also records,
in `.rocm-fleet-sha256` beside it, the sha256 with the file's size, inode, ctime and mtime (nanoseconds) as it was put
in place; the next run takes the recorded sha256 while all four are unchanged, and hashes the file otherwise. Any
write, chmod, link or replacement changes the ctime (the kernel sets it; it cannot be set back), so a changed file is
always hashed. A file hashed again and found with the controller's sha256 (only its ctime changed: a chmod to the same
mode, a hard link such as `cp -al` makes) gets its record line rewritten by the same operation — a change shown once,
on a run that changes things (never by --dry: facts only read) — so later runs do not hash it again; the line is
written only while the file's stat is still the one it had while it was hashed. A multi-GB wheelhouse is thus not
read on every host on every no-op run. The record is root's, a regular file in root's directory, replaced whole (a
temporary name and mv), and only ever skips an upload: what runs or installs is still checked at that moment (the
verifier's sha256 before each run, pip's --require-hashes).
"""

from __future__ import annotations

import io
import posixpath
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pyinfra import host
from pyinfra.api import FactBase, FileUploadCommand, StringCommand, operation

from roles import run_reads
from roles.stage import tell_command

STAGING_PREFIX = "/tmp/rocm-fleet-upload-"
# In each directory uploads go to: "SHA256 NAME SIZE INODE CTIME MTIME" of each file put there (see the module
# docstring).
SHA256_RECORD = ".rocm-fleet-sha256"
# Names that can stand in a record line (space-separated): every wheel, requirements.txt. Others are
# simply hashed each time.
_RECORDABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
# What identifies a file's current content without reading it: size, inode, change and modification time (%z, %y:
# with nanoseconds).
_STAT_FORMAT = "%s %i %z %y"
_STAT_KEY = f"stat -c '{_STAT_FORMAT}' --"
# What that prints: "SIZE INODE DATE TIME ZONE DATE TIME ZONE" — only such a key is ever put into a record.
_KEY_SHAPE = re.compile(r"\d+ \d+( \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? [+-]\d{4}){2}")


def _token() -> str:
    """128 random bits for the staging directory and the temporary names (tests replace this)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Upload:
    """One file to put into a directory on the host: its name there, its sha256, and its bytes (a controller path,
    or the bytes themselves)."""

    name: str
    sha256: str
    source: str | bytes

    def reader(self):
        # A new reader per command: pyinfra reads a file-like source once per upload.
        return io.BytesIO(self.source) if isinstance(self.source, bytes) else self.source


@dataclass(frozen=True)
class FilesFound:
    """What FilesSha256 read: {name: sha256}, and {name: stat key} of the files it hashed this time (their record was
    missing or did not match) whose stat was the same before and after the hash — the key that sha256 belongs to."""

    sha256: dict[str, str]
    hashed: dict[str, str]


class FilesSha256(FactBase):
    """The sha256 of the regular files `names` in `directory` (missing ones left out) — the recorded sha256 of a file
    whose size, inode, ctime and mtime are still those recorded, else hashed now (see FilesFound)."""

    def command(self, directory: str, names: Sequence[str]) -> str:
        record = SHA256_RECORD
        recordable = " ".join(shlex.quote(name) for name in names if _RECORDABLE.fullmatch(name))
        others = " ".join(shlex.quote(name) for name in names if not _RECORDABLE.fullmatch(name))
        # -f: regular files only (a directory or FIFO of that name is "not there"); || true: absent is data.
        regular = '[ -f "$f" ] && [ ! -L "$f" ]'
        # A file hashed also gets the key it was hashed at, when it did not change while it was read.
        hashed = f'sha256sum -- "$f" && [ "$({_STAT_KEY} "$f")" = "$k" ] && printf \'hashed %s\\t%s\\n\' "$k" "$f"'
        return (
            f"cd {shlex.quote(directory)} 2>/dev/null && {{ "
            # Recordable names (no space, no newline) in one pass: one stat for them all, the record read once by
            # one awk (its operands part=1 RECORD part=2 STDIN: the record may be empty), which prints
            # "hit NAME SHA256" for each whose record line has its key, else "miss NAME KEY".
            f'set --; for f in {recordable}; do {regular} && set -- "$@" "$f"; done; '
            f"if [ $# -gt 0 ]; then r=/dev/null; if [ -f {record} ] && [ ! -L {record} ]; then r={record}; fi; "
            f"stat --printf '%n {_STAT_FORMAT}\\n' -- \"$@\" 2>/dev/null | awk "
            '\'part == 1 { key = $0; sub(/^[^ ]+ [^ ]+ /, "", key); '
            "if (!(($2, key) in sha)) sha[$2, key] = $1; next } "
            '{ key = $0; sub(/^[^ ]+ /, "", key); if (($1, key) in sha) print "hit", $1, sha[$1, key]; '
            'else print "miss", $1, key }\' part=1 "$r" part=2 - | '
            'while read -r what f k; do if [ "$what" = hit ]; then printf \'%s  %s\\n\' "$k" "$f"; '
            f"else {hashed}; fi; done; fi; "
            # Any other name: hashed each time (the record cannot hold it).
            f'for f in {others}; do {regular} || continue; k=$({_STAT_KEY} "$f"); {hashed}; done; }}; true'
        )

    def default(self) -> FilesFound:
        return FilesFound({}, {})

    def process(self, output) -> FilesFound:
        found: dict[str, str] = {}
        keys: dict[str, str] = {}
        for line in output:
            if line.startswith("hashed "):
                key, _, name = line.removeprefix("hashed ").partition("\t")
                if _KEY_SHAPE.fullmatch(key) and name:
                    keys[name] = key
                continue
            digest, _, name = line.partition("  ")
            if len(digest) == 64 and name:
                found[name] = digest
        return FilesFound(found, {name: key for name, key in keys.items() if name in found})


class FileNames(FactBase):
    """Names of the regular files in `directory` ([] when it does not exist)."""

    def command(self, directory: str) -> str:
        return f"find {shlex.quote(directory)} -mindepth 1 -maxdepth 1 -type f -printf '%f\\n' 2>/dev/null || true"

    def default(self) -> list[str]:
        return []

    def process(self, output) -> list[str]:
        return [line for line in output if line]


def mismatch_line(path: str, sha256: str) -> str:
    return (
        f"rocm-fleet: the upload of {path} arrived with another sha256 than the controller's ({sha256[:12]}…): "
        "not installed — run the deploy again"
    )


def record_again_command(directory: str, hashed: Sequence[tuple[Upload, str]], token: str) -> str:
    """Shell that rewrites the record lines of files hashed this run and found with their upload's sha256: `hashed`
    is (upload, the stat key it was hashed at). A line is written only while the file's stat is still that key (so
    its sha256 is the one hashed); the others lose their stale line (they are hashed next time, as they would be).
    The record is replaced whole, through a temporary name and mv; a failure only costs a hash next time."""
    record = shlex.quote(posixpath.join(directory, SHA256_RECORD))
    partial = shlex.quote(posixpath.join(directory, f"{SHA256_RECORD}.{token}"))
    names = " ".join(upload.name for upload, _ in hashed)
    lines = "".join(
        f'[ "$({_STAT_KEY} {shlex.quote(posixpath.join(directory, upload.name))} 2>/dev/null)" = '
        f"{shlex.quote(key)} ] && printf '%s %s %s\\n' {upload.sha256} {upload.name} {shlex.quote(key)}; "
        for upload, key in hashed
    )
    return (
        f"{{ if [ -f {record} ] && [ ! -L {record} ]; then awk -v drop={shlex.quote(names)} "
        "'BEGIN { split(drop, d, \" \"); for (i in d) skip[d[i]] = 1 } !($2 in skip)' "
        f"{record}; fi; {lines}true; }} > {partial} && mv -f {partial} {record} || rm -f {partial}"
    )


def _record(directory: str, upload: Upload, token: str) -> str:
    """Shell (after the file is in place) that records its sha256 with its stat in SHA256_RECORD — replacing the
    name's earlier line, through a temporary name and mv. A failure to record only costs a hash next time."""
    if not _RECORDABLE.fullmatch(upload.name):
        return ""
    record = shlex.quote(posixpath.join(directory, SHA256_RECORD))
    partial = shlex.quote(posixpath.join(directory, f"{SHA256_RECORD}.{token}"))
    final = shlex.quote(posixpath.join(directory, upload.name))
    return (
        f" && {{ {{ if [ -f {record} ] && [ ! -L {record} ]; then awk -v n={shlex.quote(upload.name)} "
        f"'$2 != n' {record}; fi; printf '%s %s %s\\n' {upload.sha256} {shlex.quote(upload.name)} "
        f'"$({_STAT_KEY} {final})"; }} > {partial} && mv -f {partial} {record} || rm -f {partial}; true; }}'
    )


def private_upload_commands(uploads: Sequence[tuple[Upload, str]], token: str) -> list:
    """The commands that upload each (upload, destination path) through a private staging directory (steps 1, 2 and
    4 of the module docstring): the caller checks each destination's sha256 before it uses it."""
    staging = f"{STAGING_PREFIX}{token}"
    return [
        StringCommand("mkdir", "-m", "700", staging, _sudo=False),  # as the login account: SFTP writes as that one
        *(
            FileUploadCommand(upload.reader(), destination, remote_temp_filename=f"{staging}/{index}")
            for index, (upload, destination) in enumerate(uploads)
        ),
        StringCommand("rm", "-rf", staging, _sudo=False),
    ]


def install_commands(directory: str, uploads: Sequence[Upload], mode: str, token: str) -> list:
    """The commands that upload `uploads` into `directory` through a private staging directory (see the module)."""
    staging = f"{STAGING_PREFIX}{token}"
    # As the login account, whatever the operation's _sudo: SFTP writes as that account.
    commands: list = [StringCommand("mkdir", "-m", "700", staging, _sudo=False)]
    for index, upload in enumerate(uploads):
        final = posixpath.join(directory, upload.name)
        partial = posixpath.join(directory, f".{upload.name}.{token}")
        commands.append(FileUploadCommand(upload.reader(), partial, remote_temp_filename=f"{staging}/{index}"))
        check = f"echo {shlex.quote(f'{upload.sha256}  {partial}')} | sha256sum --check --status"
        commands.append(
            f"if {check}; then chmod {mode} {shlex.quote(partial)} && mv -f {shlex.quote(partial)} "
            f"{shlex.quote(final)}{_record(directory, upload, token)}; else rm -f {shlex.quote(partial)}; "
            f"echo {shlex.quote(mismatch_line(final, upload.sha256))} >&2; false; fi"
        )
    commands.append(StringCommand("rm", "-rf", staging, _sudo=False))
    return commands


@operation()
def checked_files(
    directory: str,
    uploads: Sequence[Upload],
    mode: str = "644",
    dir_mode: str = "755",
    delete: bool = False,
    keep: Sequence[str] = (),
):
    """Every upload is in `directory` (root's, `dir_mode`) with its sha256 — uploaded privately and checked on the
    host when it is not; delete=True: other regular files there go, except the names in `keep`."""
    present = run_reads.ask(FilesSha256, directory=directory, names=[upload.name for upload in uploads])
    needed = [upload for upload in uploads if present.sha256.get(upload.name) != upload.sha256]
    # Hashed this run (no record line matched: a chmod, a link, no record yet) and found equal: recorded again, or
    # every later run hashes them again.
    record_again = [
        (upload, present.hashed[upload.name])
        for upload in uploads
        if present.sha256.get(upload.name) == upload.sha256
        and upload.name in present.hashed
        and _RECORDABLE.fullmatch(upload.name)
    ]
    wanted = {upload.name for upload in uploads} | set(keep) | {SHA256_RECORD}
    extra = (
        sorted(name for name in run_reads.ask(FileNames, directory=directory) if name not in wanted) if delete else []
    )
    if not needed and not extra and not record_again:
        host.noop(f"{len(uploads)} file(s) in {directory} with the controller's sha256")
        return
    if record_again:
        yield tell_command(
            f"{len(record_again)} file(s) in {directory} hashed (their stat was not the recorded one) "
            f"and found with the controller's sha256: recording it in {SHA256_RECORD}, so later runs "
            "do not hash them again"
        )
        yield record_again_command(directory, record_again, _token())
    if needed:
        yield f"mkdir -p -- {shlex.quote(directory)} && chmod {dir_mode} -- {shlex.quote(directory)}"
        yield from install_commands(directory, needed, mode, _token())
    if extra:
        yield "rm -f " + " ".join(shlex.quote(posixpath.join(directory, name)) for name in extra)
