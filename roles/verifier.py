"""The verifier on each host: one installed, byte-compiled version per checkout, held to one rule before every run.

On a host (verify/launcher.py says what the rule is and how the launcher keeps it):

    /var/lib/rocm-fleet/verifier/              root's, 0755
        launcher.py                            what every caller runs: `python3 -I -S …/launcher.py [--version V] …`
        <V>/                                   one version: verify/ and pyelftools, compiled by root, and MANIFEST
        current -> <V>                         the version the last deploy installed

V is the sha256 of the version's source files (`version()`, computed here from this checkout), so a checkout
knows its version's name before any host has it. The controller's own runs (the strays fact, the verification) ask
for V itself (`--version V`): a host that has no intact V runs nothing of another checkout's. The apt hook, the boot
unit and the status task run `current`, so they follow a new version as soon as it is installed. Every caller first
checks the launcher's sha256 against this checkout's (`verifier_command`), then the launcher checks the version.

The install (`install_verifier`, planned once per host and run by the first stage that needs it): the sources as one
tar.gz, uploaded through a private staging directory and unpacked only with the sha256 computed here
(roles/uploads.py), compiled by the host's python3, sealed (MANIFEST) and checked by the launcher's own rule in a
private directory, then moved into place; `current` is switched in one rename; every other version but the one it
pointed at before (a run of it may still be going) is removed. All of it under the host lock (roles/host_lock.py).

What the inventory asks of a host's verifier is `question_for(settings)` (verify/question.py): the verification stage
asks it (its `check_arguments`), the boot unit asks it once per boot, the apt hook its static part, and the status
task holds every kept report to it (`question.to_request()`: a report answering anything else proves nothing).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import posixpath
import secrets
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path

import elftools
from pyinfra import host
from pyinfra.api import FactBase, operation

import verify
from roles import run_reads
from roles.host_lock import under_host_lock
from roles.run_memory import memory_of
from roles.settings import HostSettings
from roles.stage import fail_command, tell_command
from roles.uploads import Upload, mismatch_line, private_upload_commands
from verify.launcher import CURRENT, REFUSED, manifest_line, version_of
from verify.question import Question
from verify.report.kept_files import STATE_ROOT

TOP = f"{STATE_ROOT}/verifier"
LAUNCHER = f"{TOP}/launcher.py"
LOCK_WHAT = "the verifier"  # what a run waiting for the host lock names
# What the layout before this one left on a host: the uploaded archive, its compiled-code cache and record, the apt
# hook's own copy.
LEGACY = (
    f"{STATE_ROOT}/verify.pyz",
    f"{STATE_ROOT}/.rocm-fleet-sha256",
    f"{STATE_ROOT}/bytecode",
    f"{STATE_ROOT}/apt-hook/verifier",
)
_PACKAGES = {"verify": Path(verify.__file__).parent, "elftools": Path(elftools.__file__).parent}
_EPOCH = 315532800  # 1980-01-01: the archive's entries must not depend on the checkout's file times


@functools.cache
def _sources() -> dict[str, bytes]:
    """{path in a version: bytes} of every module and data file of verify/ and pyelftools, caches left out."""
    files = {}
    for name, directory in _PACKAGES.items():
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                files[f"{name}/{path.relative_to(directory).as_posix()}"] = path.read_bytes()
    return files


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        directories = sorted({posixpath.dirname(name) for name in files} - {""})
        for name in sorted({parent for d in directories for parent in _parents(d)}):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _EPOCH
            tar.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, _EPOCH
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _parents(directory: str) -> list[str]:
    parts = directory.split("/")
    return ["/".join(parts[: index + 1]) for index in range(len(parts))]


@functools.cache
def version() -> str:
    """V, this checkout's version: the sha256 of its sources' manifest lines (verify.launcher.version_of)."""
    return version_of(manifest_line(hashlib.sha256(data).hexdigest(), name) for name, data in _sources().items())


@functools.cache
def archive() -> bytes:
    """This checkout's verifier as a reproducible tar.gz, built once per controller process, in memory (never from a
    shared directory such as /tmp, where another local account could plant a file of the expected name)."""
    return _tar_gz(_sources())


@functools.cache
def launcher_sha256() -> str:
    return hashlib.sha256((_PACKAGES["verify"] / "launcher.py").read_bytes()).hexdigest()


def not_installed_line(prefix: str = "rocm-fleet:") -> str:
    return (
        f"{prefix} not run - this host has no rocm-fleet verifier ({LAUNCHER}): run the deploy "
        "(pyinfra INVENTORY deploy.py)"
    )


def stale_line(prefix: str = "rocm-fleet:") -> str:
    return (
        f"{prefix} not run - {LAUNCHER} is not the launcher this checkout installs: run the deploy (or "
        "tasks/verify.py) again"
    )


def verifier_command(*arguments: str, python: str = "python3", pinned: bool = True, prefix: str = "rocm-fleet:") -> str:
    """Shell that runs the installed verifier with `arguments` (e.g. "strays", "--json") — only when its launcher
    has this checkout's sha256; `pinned`: this checkout's version (the controller's own runs), else the host's
    current one. Otherwise one line on stderr (`prefix` first) and exit status REFUSED, as the launcher's own
    refusal. `-I`: no PYTHON* variables, user site or current directory; `-S`: no site module (no .pth file runs)."""
    check = f"echo {shlex.quote(f'{launcher_sha256()}  {LAUNCHER}')} | sha256sum --check --status 2>/dev/null"
    pin = ("--version", version()) if pinned else ()
    run = " ".join(shlex.quote(part) for part in (python, "-I", "-S", LAUNCHER, *pin, *arguments))
    return (
        f"if {check}; then {run}; elif [ -e {LAUNCHER} ]; then echo {shlex.quote(stale_line(prefix))} >&2; "
        f"(exit {REFUSED}); else echo {shlex.quote(not_installed_line(prefix))} >&2; (exit {REFUSED}); fi"
    )


def question_for(settings: HostSettings) -> Question:
    """The question this host's settings ask."""
    metrics = settings.node_exporter_textfile_dir
    return Question(
        venv=Path(settings.venv_path),
        expect_rocm=settings.rocm_release,
        expect_bitsandbytes=settings.bitsandbytes_version,
        device=settings.verify_device,
        gpu_required=settings.gpu_required,
        torch_label=settings.torch_label,
        # ROCm comes from AMD's repositories: their pin and lists are checked.
        expect_amd_repo=settings.rocm_install == "install",
        model=settings.verify_model,
        probe_user=settings.venv_owner,  # the venv's code runs as its owner
        metrics_dir=Path(metrics) if metrics else None,
    )


@dataclass(frozen=True)
class InstalledFiles:
    python: str | None  # the host's python3, None when there is none
    launcher: str  # "ours" (this checkout's sha256), "other", or "none"
    current: str | None  # the version `current` names
    version: str  # this checkout's version: "none", "unchecked" (no launcher of ours), or what --check says
    legacy: tuple[str, ...] = ()  # what the layout before this one left

    @property
    def intact(self) -> bool:
        """This checkout's version is there, holds to the rule, and is compiled for the host's python3."""
        return self.launcher == "ours" and self.version == "intact"


class InstalledVerifier(FactBase):
    """What of this checkout's verifier a host has. Output: `python PATH`, `launcher ours|other|none`, `current V`,
    `version none|unchecked|<the launcher's --check line>`, then a `legacy PATH` line for each leftover."""

    def command(self) -> str:
        launcher_sha = shlex.quote(f"{launcher_sha256()}  {LAUNCHER}")
        directory = f"{TOP}/{version()}"
        return (
            'p=$(command -v python3 || true); printf "python %s\\n" "$p"; '
            f"if [ -f {LAUNCHER} ] && echo {launcher_sha} | sha256sum --check --status 2>/dev/null; then l=ours; "
            f'elif [ -e {LAUNCHER} ]; then l=other; else l=none; fi; echo "launcher $l"; '
            f'printf "current %s\\n" "$(readlink {TOP}/{CURRENT} 2>/dev/null)"; '
            f'if [ ! -d {directory} ]; then echo "version none"; elif [ "$l" != ours ] || [ -z "$p" ]; then '
            f'echo "version unchecked"; else printf "version %s\\n" '
            f'"$("$p" -I -S {LAUNCHER} --check {directory} {version()} 2>&1 | tail -n 1)"; fi; '
            f'for f in {" ".join(LEGACY)}; do if [ -e "$f" ]; then echo "legacy $f"; fi; done'
        )

    def process(self, output) -> InstalledFiles:
        fields: dict[str, str] = {}
        legacy = []
        for line in output:
            key, _, value = line.partition(" ")
            if key == "legacy":
                legacy.append(value)
            else:
                fields.setdefault(key, value)
        return InstalledFiles(
            python=fields.get("python") or None,
            launcher=fields.get("launcher", "none"),
            current=fields.get("current") or None,
            version=fields.get("version", "none"),
            legacy=tuple(legacy),
        )

    def default(self) -> InstalledFiles:
        return InstalledFiles(None, "none", None, "none")


def install_script(partial: str, token: str, top: str = TOP, legacy: tuple[str, ...] = LEGACY) -> str:
    """Shell (root, under the host lock) that installs the uploaded archive at `partial` as this checkout's version:
    checked against the sha256 computed here, unpacked, the host's python3 held to the launcher's interpreter rule,
    compiled and sealed in a private directory, held to the
    launcher's rule, moved into place; then the launcher copied beside it, `current` switched, older versions
    removed (all but the one `current` named before), and what the earlier layout left."""
    q = shlex.quote
    name, sha256 = version(), hashlib.sha256(archive()).hexdigest()
    final = f"{top}/{name}"
    checked = f"echo {q(f'{sha256}  {partial}')} | sha256sum --check --status"
    launcher = '"$work/verify/launcher.py"'
    return "; ".join(
        (
            "set -e",
            f"if ! {checked}; then rm -f {q(partial)}; echo {q(mismatch_line(final, sha256))} >&2; exit 1; fi",
            # Leftovers of a run killed halfway: work directories (no other install runs: the host lock is held), and
            # archives a day old (a run waiting for the lock has its archive here already: it is left alone).
            f"rm -rf {q(top)}/.install.*",
            f"find {q(top)} -maxdepth 1 -name '.upload.*' -mmin +1440 -delete",
            f"work=$(mktemp -d {q(top)}/.install.XXXXXXXX)",
            f'tar -xzf {q(partial)} -C "$work" --no-same-owner',
            f"rm -f {q(partial)}",
            # The interpreter compiles and seals as root: it is held to the launcher's rule before it runs anything.
            f'if ! python3 -I -S {launcher} --interpreter > /dev/null; then rm -rf "$work"; exit {REFUSED}; fi',
            'python3 -I -S -m compileall -q --invalidation-mode unchecked-hash "$work" > /dev/null',
            'chmod -R u=rwX,go=rX "$work"',
            f'python3 -I -S {launcher} --seal "$work"',
            f'python3 -I -S {launcher} --check "$work" {name} > /dev/null',
            f"old=$(readlink {q(top)}/{CURRENT} || true)",
            f'if [ -e {q(final)} ]; then mv {q(final)} "$work.replaced"; fi',
            f'mv "$work" {q(final)}',
            f"cp {q(final)}/verify/launcher.py {q(top)}/.launcher.{token}",
            f"mv -f {q(top)}/.launcher.{token} {q(top)}/launcher.py",
            f"ln -s {name} {q(top)}/.current.{token}",
            f"mv -fT {q(top)}/.current.{token} {q(top)}/{CURRENT}",
            f'for d in {q(top)}/*; do case "${{d##*/}}" in {name}|"$old"|launcher.py|{CURRENT}) ;; '
            '*) rm -rf "$d" ;; esac; done',
            f'rm -rf "$work.replaced" {" ".join(q(path) for path in legacy)}',
        )
    )


def switch_script(top: str = TOP, legacy: tuple[str, ...] = LEGACY) -> str:
    """Shell (root, under the host lock): this checkout's intact version made `current` again, and what the earlier
    layout left removed."""
    token, q = _token(), shlex.quote
    return (
        f"ln -s {version()} {q(top)}/.current.{token} && mv -fT {q(top)}/.current.{token} {q(top)}/{CURRENT} && "
        f"rm -rf {' '.join(q(path) for path in legacy)}"
    )


def _token() -> str:
    """128 random bits for the private names of an install (tests replace this)."""
    return secrets.token_hex(16)


@operation()
def verifier_installed(lock_timeout: int = 300):
    """This checkout's verifier installed on the host and `current` (see the module docstring)."""
    files = run_reads.ask(InstalledVerifier)
    name = version()
    if files.intact and files.current == name and not files.legacy:
        host.noop(f"verifier {name[:12]} installed and current ({TOP})")
        return
    if files.python is None:
        yield fail_command(
            "verifier: python3 is not installed on this host, and the verifier runs with it — "
            "apt-get install python3, then deploy again"
        )
        return
    if files.intact:
        yield tell_command(f"verifier {name[:12]}: made current again (it was {files.current or 'none'})")
        yield under_host_lock(switch_script(), lock_timeout, LOCK_WHAT)
        return
    if files.version not in ("none", "unchecked"):
        yield tell_command(f"verifier {name[:12]} on the host: {files.version}: installing it again")
    token = _token()
    partial = f"{TOP}/.upload.{token}"
    yield f"mkdir -p {TOP} && chown root:root {STATE_ROOT} {TOP} && chmod 755 {STATE_ROOT} {TOP}"
    upload = Upload(posixpath.basename(partial), hashlib.sha256(archive()).hexdigest(), archive())
    yield from private_upload_commands([(upload, partial)], token)
    # A run that cannot have the lock (or fails on the way) takes its archive away with it.
    locked = under_host_lock(install_script(partial, token), lock_timeout, LOCK_WHAT)
    yield f"{locked} || {{ rm -f {shlex.quote(partial)}; false; }}"


def install_reads() -> list[run_reads.Ask]:
    """What the install asks a host (for the stages' read-ahead)."""
    return [run_reads.Ask.of(InstalledVerifier)]


def install_verifier(lock_timeout: int = 300) -> bool:
    """Plan this checkout's verifier on the current host, unless an earlier stage of this run already did; True when
    the run installs or switches a version there (the apt hook then records a new baseline)."""
    planned = memory_of(host.state).verifier_planned
    if host.name not in planned:
        files = run_reads.ask(InstalledVerifier)
        planned[host.name] = not (files.intact and files.current == version())
        verifier_installed(name="Install the verifier", lock_timeout=lock_timeout)
    return planned[host.name]
