"""The apt hook's one operation: installed and up to date (`present=True`), or gone (`present=False`)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.apt_hook.facts import AptHookFiles
from roles.apt_hook.model import (
    CONF_PATH,
    LOCK_WHAT,
    VERIFIER_COPY,
    HookSpec,
    HookSpecError,
    config_text,
    copy_verifier_command,
    hook_command,
    remove_command,
    write_config_command,
)
from roles.host_lock import under_host_lock
from roles.stage import fail_command, tell_command


def _same_text(installed: str | None, wanted: str) -> bool:
    # The fact returns the file's lines; compare line by line (a trailing newline is not a difference).
    return installed is not None and installed.splitlines() == wanted.splitlines()


def _locked(steps: list[str], lock_timeout: int) -> str:
    # One command under the host lock: another run's copy, configuration and baseline never interleave with these.
    return under_host_lock(" && ".join(f"{{ {step}; }}" for step in steps), lock_timeout, LOCK_WHAT)


@operation()
def apt_hook(
    present: bool = True,
    venv: str = "",
    expect_rocm: str = "",
    expect_bitsandbytes: str = "",
    verifier_sha256: str = "",
    lock_timeout: int = 300,
    metrics_dir: str | None = None,
):
    """The apt hook that re-checks linkage and strays after every dpkg run: installed for this venv and release, with
    a copy of the verifier `verifier_sha256` (the sha256 of the uploaded verify.pyz) whose files match its manifest,
    and run once when either changed to record its baseline (with `metrics_dir`, each run also rewrites node_exporter's
    rocm_fleet.prom there); or, with present=False, its configuration, verifier copy and results removed. Changes run
    under the host lock, waiting up to `lock_timeout` seconds for another run."""
    files = run_reads.ask(AptHookFiles)
    if not present:
        if not files.anything:
            host.noop("apt hook not installed")
            return
        yield _locked([remove_command()], lock_timeout)
        return
    if files.python is None:
        yield fail_command(
            "apt hook: python3 is not installed on this host, and the hook runs the verifier with it — "
            "apt-get install python3, then deploy again"
        )
        return
    try:
        spec = HookSpec(files.python, venv, expect_rocm, expect_bitsandbytes, metrics_dir)
        copy = copy_verifier_command(files.python, verifier_sha256)
    except HookSpecError as error:
        yield fail_command(str(error))
        return
    wanted = config_text(spec)
    new_copy = files.verifier_sha256 != verifier_sha256
    new_config = not _same_text(files.config, wanted)
    if not (new_copy or new_config):
        # Without a result (deleted, or the venv not there yet) the next dpkg run records its baseline itself:
        # running the hook here every time would make this operation change something on every deploy.
        baseline = "" if files.has_state else "; no result recorded yet: the next dpkg run records its baseline"
        host.noop(f"apt hook installed and up to date ({CONF_PATH}){baseline}")
        return
    if files.copy_damaged:
        yield tell_command(
            f"apt hook: the verifier copy in {VERIFIER_COPY} differs from its manifest (a file "
            "changed, went missing or was added): extracting it again"
        )
    steps = [copy] if new_copy else []
    if new_config:
        steps.append(write_config_command(wanted))
    # Run it once now, as apt will: records the baseline the next dpkg run is compared with.
    steps.append(hook_command(spec))
    yield _locked(steps, lock_timeout)
