"""A stage as a pyinfra deploy, and what a stage does to one host: stop it with one line, or say why it does nothing.

`@stage("ROCm")` over `def rocm(settings)` makes the deploy that a task file calls as `rocm()`: pyinfra names its
operations "ROCm | …", the function gets the host's validated settings (roles/settings.py), and on a host that an
earlier stage of this run has stopped it plans nothing but the note "skipped: an earlier stage stopped this host" (a
task file run alone has no earlier stage).

A stage that finds a host unfit (unsupported OS, colliding packages it may not remove, another ROCm release) calls
`stop(title, reason)`: an operation that, when it executes, prints the reason on that host and fails it. pyinfra then
runs nothing more on that host while the other hosts go on, and the run exits 1. Raising an exception instead would
abort the whole fleet. `note(message)` is an operation that changes nothing and says so: the plan then shows e.g.
"ROCm | skipped: rocm_install is 'skip'".

`reads(settings)`, when given, lists the facts the stage will ask a host on a run that changes nothing (roles/
run_reads.py): they are read ahead in one command per host before the stage plans — already done when deploy.py read
ahead for all its stages (`read_ahead_for_stages`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, deploy, operation
from pyinfra.context import ctx_state

from roles import run_reads
from roles.run_memory import memory_of
from roles.settings import HostSettings, settings_for

SKIPPED = "skipped: an earlier stage stopped this host"


Reads = Callable[[HostSettings], list[run_reads.Ask]]


def stage(title: str, every_host: Callable[[HostSettings], None] | None = None, reads: Reads | None = None):
    """Decorate `function(settings)` as the stage `title` (see the module docstring). `every_host(settings)`, when
    given, runs first on every host, also on one that is skipped (the verification stage lists those in its summary);
    `reads(settings)`: the facts it asks on a no-op run, read ahead. The deploy keeps `reads` as its attribute.
    """

    def decorator(function: Callable[[HostSettings], None]) -> Callable[[], None]:
        @deploy(title)
        @functools.wraps(function)
        def entry() -> None:
            settings = settings_for(host)
            if every_host is not None:
                every_host(settings)
            if host.name in memory_of(ctx_state.get()).stopped_hosts:
                note(SKIPPED)
                return
            if reads is not None:
                run_reads.read_ahead(reads(settings))
            function(settings)

        entry.reads = reads
        return entry

    return decorator


def read_ahead_for_stages(stages: Iterable[Callable[[], None]]) -> None:
    """Read ahead, in one command to the current host, every fact the deploys `stages` ask on a no-op run (deploy.py,
    for all its stages at once)."""
    settings = settings_for(host)
    run_reads.read_ahead(ask for stage in stages if stage.reads is not None for ask in stage.reads(settings))


def _fail_host(state, host, reason: str) -> bool:
    # pyinfra calls a command function with (state, host) and takes its return value as the command's status.
    host.log_styled(reason, fg="red", log_func=logger.error)
    return False


def _log_reason(state, host, message: str) -> bool:
    host.log_styled(message, log_func=logger.info)
    return True


def fail_command(reason: str) -> FunctionCommand:
    """A command that fails the host with `reason`, for operations that find a blocker only at execution time."""
    return FunctionCommand(_fail_host, (reason,), {})


def tell_command(message: str) -> FunctionCommand:
    """A command that prints `message` on the host's line when the operation runs (why it changes something)."""
    return FunctionCommand(_log_reason, (message,), {})


@operation(is_idempotent=False)
def _stop_here(reason: str):
    yield fail_command(reason)


def stop(title: str, reason: str):
    """Plan to fail this host here, printing `reason` (one line: what is wrong and what to do).

    `title` is short and the same for every host stopped for the same kind of reason ("unsupported OS"): the plan
    shows the operation as "<Stage> | stop: <title>" for all of them.
    """
    # Recorded now, not in the operation body: with `-y` pyinfra does not run bodies while planning.
    memory_of(ctx_state.get()).stopped_hosts.add(host.name)
    return _stop_here(reason, name=f"stop: {title}")


@operation()
def _note_here(message: str):
    host.noop(message)
    yield from ()


def note(message: str, name: str | None = None):
    """An operation that changes nothing and says why: `message` shows with -v; the plan shows `name` (default: the
    message itself, so keep it the same for every host)."""
    return _note_here(message, name=name or message)
