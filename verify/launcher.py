"""The installed verifier's entry on a host: hold the version to its rule, then run `verify` from it.

    python3 -I -S /var/lib/rocm-fleet/verifier/launcher.py [--version V] COMMAND …   run (exit 3: refused)
    python3 -I -S launcher.py --check DIRECTORY V                                     "intact …", or why not (exit 3)
    python3 -I -S launcher.py --seal DIRECTORY                                        write DIRECTORY/MANIFEST
    python3 -I -S launcher.py --interpreter                                          "root's alone", or why not

A host keeps each version of the verifier in /var/lib/rocm-fleet/verifier/<V>/: verify/ and pyelftools, byte-compiled
by root for the host's python3, and MANIFEST, the sha256 of every other file there. V is the sha256 of the manifest's
lines for the sources (`version_of`: the compiled files left out), so the controller knows V from its own checkout and
a version's name says what it holds. `current` names the version the last deploy installed (what the apt hook, the
boot unit and the status task run); this file's copy beside them is what every caller runs.

Nothing of a version is imported until it holds to the rule (`problem`), checked on every run:
- its directory and every directory above it belong to root, and no other account may write them (a directory above
  the verifier's own may be world-writable with the sticky bit, as /tmp is: no one else can replace root's entries);
- every entry in it is a directory or a regular file of root's that no other account may write: no symbolic link;
- its files are exactly those MANIFEST lists, each with its sha256, and the sources' lines hash to its name.
Run as a file under `-I`, python3 puts no directory of ours on sys.path (a directory or zip run as a program is put
there, even under -I), so until then only the standard library can be imported; `-S`: no .pth file of the system's
site directories runs either (nor is any of them on sys.path: /usr/local/lib/python3.X/dist-packages, root:staff 2775
on older installs, is never read). The launcher refuses to run without both flags.

The interpreter is held to the venv's rule first (`interpreter_problem`), in every mode: the python3 binary (as
resolved) and the directories above it, and every entry of sys.path as `-I -S` leaves it (the standard library and
lib-dynload; site-packages or dist-packages inside it are not on that path and are left out) with every file and
directory in it and every directory above it, belong to root and no other account may write them (a group may write
only when it is root's group; a directory above may be world-writable with the sticky bit, as /tmp). What Python
itself reads before any code of ours runs (encodings/) is read before this check can be made: the check then refuses
to go on, so no verifier code and nothing the verifier would import runs.

A refusal is one line on stderr and exit status 3 (the apt hook's: its own prefix, and status 0: it never fails
dpkg or apt). The compiled files are used as they are (unchecked-hash: the manifest is their check) and none is
written (a python3 they were not compiled for compiles in memory).
Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys

MANIFEST = "MANIFEST"
CURRENT = "current"
REFUSED = 3
# Whose line a refusal is, per command; the apt hook's never fails apt.
PREFIXES = {"apt-hook": "rocm-fleet apt hook:", "boot-check": "rocm-fleet boot check:"}
MAX_MANIFEST = 1 << 20  # about 300 lines of 80 bytes
FIX = "run the deploy (or tasks/verify.py) again"


def is_version(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def manifest_line(sha256: str, path: str) -> str:
    return f"{sha256}  {path}"  # sha256sum's own format


def version_of(lines) -> str:
    """A version's name: the sha256 of its manifest's source lines (not the compiled files), sorted by path."""
    sources = sorted((line for line in lines if "__pycache__/" not in line), key=lambda line: line[66:])
    return hashlib.sha256("".join(line + "\n" for line in sources).encode()).hexdigest()


def _writable_by_others(info: os.stat_result) -> bool:
    return info.st_uid != 0 or bool(info.st_mode & 0o022)


def _not_roots_alone(info: os.stat_result) -> bool:
    """The venv's rule (verify/checks/probe_account.py): another owner, or writable by others or a group not root's."""
    mode = info.st_mode
    return info.st_uid != 0 or bool(mode & 0o002) or bool(mode & 0o020 and info.st_gid != 0)


def _above_problem(directory: str) -> str | None:
    """The first directory from `directory` (a real path) up to / that another account could change: each must be
    root's alone, or root's and sticky (as /tmp: no one else can replace root's entries there)."""
    path = directory
    while True:
        info = os.lstat(path)
        sticky = info.st_uid == 0 and info.st_mode & stat.S_ISVTX
        if not stat.S_ISDIR(info.st_mode) or (_not_roots_alone(info) and not sticky):
            return _who(path, info)
        if path == "/":
            return None
        path = os.path.dirname(path)


def _tree_problem(top: str) -> str | None:
    """The first entry under `top` (a real path, `top` included) that is not root's alone; site-packages and
    dist-packages directly under it are left out (not on sys.path under -S). A symbolic link is held to the rule
    through what it points at."""
    pending = [top]
    while pending:
        directory = pending.pop()
        info = os.lstat(directory)
        if _not_roots_alone(info):
            return _who(directory, info)
        with os.scandir(directory) as entries:
            for entry in entries:
                if directory == top and entry.name in ("site-packages", "dist-packages"):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    if info.st_uid != 0:
                        return _who(entry.path, info)
                    try:
                        info = os.stat(entry.path)
                    except OSError:
                        continue  # a dangling link: nothing can be read through it
                    if _not_roots_alone(info):
                        return _who(f"{entry.path} -> {os.path.realpath(entry.path)}", info)
                elif stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                elif _not_roots_alone(info):
                    return _who(entry.path, info)
    return None


def _who(path: str, info: os.stat_result) -> str:
    return f"{path} (owner uid {info.st_uid}, group gid {info.st_gid}, mode {info.st_mode & 0o7777:o})"


def interpreter_problem() -> str | None:
    """Why this python3 must not run as root: not run with -I -S, or its binary or its standard library not root's
    alone (see the module docstring); None when it may."""
    if not (sys.flags.isolated and sys.flags.no_site):
        return f"{sys.executable} was not started as python3 -I -S (isolated, no site module) - run it so"
    try:
        binary = os.path.realpath(sys.executable)
        info = os.stat(binary)
        found = _who(binary, info) if _not_roots_alone(info) else None
        found = found or _above_problem(os.path.dirname(binary))
        found = found or _above_problem(os.path.realpath(os.path.dirname(os.path.abspath(sys.executable))))
        walked: list[str] = []
        for entry in sys.path:
            if found or not entry or not os.path.exists(entry):
                continue
            real = os.path.realpath(entry)
            if any(real == top or real.startswith(top + os.sep) for top in walked):
                continue
            found = _above_problem(os.path.dirname(real))
            if not found:
                found = _tree_problem(real) if os.path.isdir(real) else _file_problem(real)
            walked.append(real)
    except OSError as error:
        found = f"{getattr(error, 'filename', None) or sys.executable}: {error.strerror or error}"
    if found:
        return (
            f"the interpreter {sys.executable} is not root's alone: {found} - root runs nothing another account can "
            "change: make it root's and writable by root only (chown root:root, chmod go-w), or reinstall python3"
        )
    return None


def _file_problem(path: str) -> str | None:
    info = os.stat(path)
    return _who(path, info) if _not_roots_alone(info) else None


def _chain_problem(directory: str) -> str | None:
    """The first directory from `directory` (a real path) up to / that another account could change, or None: the
    version's and the verifier's own directory root's alone, those above them at least sticky and root's."""
    path, depth = directory, 0
    while True:
        info = os.lstat(path)
        sticky = depth >= 2 and info.st_uid == 0 and info.st_mode & stat.S_ISVTX
        if not stat.S_ISDIR(info.st_mode) or (_writable_by_others(info) and not sticky):
            return f"{path} is not a directory only root can change (owner uid {info.st_uid}, mode {info.st_mode:o})"
        if path == "/":
            return None
        path, depth = os.path.dirname(path), depth + 1


def _files(directory: str) -> tuple[dict[str, str], str | None]:
    """{relative path: path} of every file under `directory`, or the first entry that breaks the rule."""
    found: dict[str, str] = {}
    pending = [(directory, "")]
    while pending:
        where, relative = pending.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and not _writable_by_others(info):
                    pending.append((entry.path, f"{relative}{entry.name}/"))
                elif stat.S_ISREG(info.st_mode) and not _writable_by_others(info):
                    found[relative + entry.name] = entry.path
                else:
                    kind = "not a regular file or directory" if stat.S_ISLNK(info.st_mode) else "not root's alone"
                    return found, f"{entry.path} is {kind} (owner uid {info.st_uid}, mode {info.st_mode:o})"
    return found, None


def _sha256(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as opened:
        return hashlib.sha256(opened.read()).hexdigest()


def problem(directory: str, version: str) -> str | None:
    """Why the version `version` in `directory` must not run (see the module docstring), or None."""
    if not is_version(version):
        return f"{version!r} is not a verifier version"
    try:
        directory = os.path.realpath(directory)
        found = _chain_problem(directory)
        if found:
            return found
        files, found = _files(directory)
        if found:
            return found
        if files.pop(MANIFEST, None) is None:
            return f"{directory} has no {MANIFEST}"
        with open(os.path.join(directory, MANIFEST), "rb") as opened:
            text = opened.read(MAX_MANIFEST + 1).decode("utf-8", "replace")
        lines = text.splitlines()
        if len(text) > MAX_MANIFEST or not all(len(line) > 66 and line[64:66] == "  " for line in lines):
            return f"{os.path.join(directory, MANIFEST)} is not a manifest (sha256sum's lines)"
        listed = {line[66:]: line[:64] for line in lines}
        if len(listed) != len(lines) or set(listed) != set(files):
            extra, missing = sorted(set(files) - set(listed)), sorted(set(listed) - set(files))
            return f"{directory} holds other files than its {MANIFEST} lists (extra {extra[:3]}, missing {missing[:3]})"
        for name, path in files.items():
            if _sha256(path) != listed[name]:
                return f"{path} is not the file its {MANIFEST} lists (another sha256)"
        hashed = version_of(lines)
        if hashed != version:
            return f"{directory} does not hold version {version[:12]}… (its sources hash to {hashed[:12]}…)"
    except OSError as error:
        return f"{getattr(error, 'filename', None) or directory}: {error.strerror or error}"
    return None


def compiled_for_this_python(directory: str) -> bool:
    with open(os.path.join(directory, MANIFEST), encoding="utf-8") as opened:
        return f".{sys.implementation.cache_tag}.pyc" in opened.read(MAX_MANIFEST)


def seal(directory: str) -> str | None:
    """Write directory/MANIFEST: every other file's sha256, sorted by path (the install, before `--check`); or say
    which entry breaks the rule."""
    files, found = _files(directory)
    if found:
        return found
    lines = sorted((manifest_line(_sha256(path), name) for name, path in files.items()), key=lambda line: line[66:])
    with open(os.path.join(directory, MANIFEST), "x", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unsafe = interpreter_problem()
    if argv == ["--interpreter"]:
        print(unsafe or f"{sys.executable}: root's alone", file=sys.stderr if unsafe else sys.stdout)
        return REFUSED if unsafe else 0
    if unsafe and argv[:1] in (["--seal"], ["--check"]):
        print(unsafe, file=sys.stderr)
        return REFUSED
    if argv[:1] in (["--seal"], ["--check"]) and len(argv) == (2 if argv[0] == "--seal" else 3):
        found = seal(argv[1]) if argv[0] == "--seal" else problem(argv[1], argv[2])
        if found:
            print(found, file=sys.stderr)
            return REFUSED
        if argv[0] == "--seal":
            return 0
        uncompiled = "" if compiled_for_this_python(argv[1]) else f", not compiled for {sys.implementation.cache_tag}"
        print(f"intact{uncompiled}")
        return 0
    launcher = os.path.realpath(__file__)
    top, found = os.path.dirname(launcher), unsafe
    if not found and _writable_by_others(os.lstat(launcher)):
        found = f"{launcher} is not root's alone"
    if argv[:1] == ["--version"] and len(argv) >= 2:
        version, argv = argv[1], argv[2:]
    else:
        try:
            version = os.readlink(os.path.join(top, CURRENT))
        except OSError:
            version, found = "", found or f"no verifier version is installed ({os.path.join(top, CURRENT)} is missing)"
    directory = os.path.join(top, version)
    found = found or problem(directory, version)
    if found:
        command = argv[0] if argv else ""
        print(f"{PREFIXES.get(command, 'rocm-fleet verifier:')} not run - {found} - {FIX}", file=sys.stderr)
        return 0 if command == "apt-hook" else REFUSED
    sys.dont_write_bytecode = True
    sys.path.insert(0, directory)
    from verify.cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
