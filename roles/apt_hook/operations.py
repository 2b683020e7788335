"""The apt hook's one operation: installed and up to date (`present=True`), or gone (`present=False`)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from roles import run_reads
from roles.apt_hook.facts import AptHookFiles
from roles.apt_hook.model import (
    CONF_PATH,
    DPKG_CONF_PATH,
    LOCK_WHAT,
    HookSpec,
    HookSpecError,
    baseline_command,
    hook_files,
    remove_command,
    write_file_command,
)
from roles.host_lock import under_host_lock
from roles.stage import fail_command
from verify.question import Question


def _same_text(installed: str | None, wanted: str) -> bool:
    # The fact returns the file's lines; compare line by line (a trailing newline is not a difference).
    return installed is not None and installed.splitlines() == wanted.splitlines()


def _locked(steps: list[str], lock_timeout: int) -> str:
    # One command under the host lock: another run's configuration and baseline never interleave with these.
    return under_host_lock(" && ".join(f"{{ {step}; }}" for step in steps), lock_timeout, LOCK_WHAT)


@operation()
def apt_hook(
    present: bool = True,
    question: Question | None = None,
    new_verifier: bool = False,
    lock_timeout: int = 300,
):
    """The apt hook that re-checks linkage and strays after every change to the dpkg database, asking the installed
    verifier `question` (the inventory's; with its `metrics_dir`, each run also rewrites node_exporter's
    rocm_fleet.prom there): its script and dpkg's and apt's lines installed (roles/apt_hook/model.py), and the check
    run once when one of them changed or this run installs a new verifier (`new_verifier`), to record the baseline
    the next dpkg run is compared with; or, with present=False, its files and results removed. Changes run under the
    host lock, waiting up to `lock_timeout` seconds for another run."""
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
        spec = HookSpec(files.python, question)
    except HookSpecError as error:
        yield fail_command(str(error))
        return
    changed = [file for file in hook_files(spec) if not _same_text(files.text_of(file.path), file.text)]
    if not (changed or new_verifier):
        # Without a result (deleted, or the venv not there yet) the next dpkg run records its baseline itself:
        # running the hook here every time would make this operation change something on every deploy.
        baseline = "" if files.has_state else "; no result recorded yet: the next dpkg run records its baseline"
        host.noop(f"apt hook installed and up to date ({DPKG_CONF_PATH}, {CONF_PATH}){baseline}")
        return
    # Run it once now, as dpkg and apt will: records the baseline the next dpkg run is compared with.
    yield _locked([*(write_file_command(file) for file in changed), baseline_command()], lock_timeout)
