"""`python -m verify apt-hook --venv PATH --expect-rocm X.Y.Z` — the check apt runs after every dpkg run.

The apt hook (`DPkg::Post-Invoke`, installed by roles/apt_hook) runs this with the host's python3. It runs the static
checks only — the process model of python → torch → bitsandbytes' library and the stray distro ROCm packages, the
same code as `verify check --static-only`; no torch import, no GPU — keeps the result under
/var/lib/rocm-fleet/apt-hook/ (verify/report/hook_state.py), compares it with the previous result
(verify/report/drift.py) and prints into apt's own output:
  - a WARNING block when something got worse, one line per change (what now resolves where, which stray package
    arrived and what pulled it in);
  - one line when something got better, cleared, or just changed;
  - nothing when nothing changed;
  - and, whatever changed, one line while a reboot is pending: the kernel that boots next and whether it has
    amdgpu.ko (a kernel this dpkg run installed without it is also a WARNING block line: "kernel 6.8.0-51-generic
    was installed without amdgpu.ko: it boots next — after the next reboot the GPU is gone").

With `--metrics-dir DIR` it then rewrites node_exporter's DIR/rocm_fleet.prom from every result kept beside its state
directory (verify/report/metrics.py: its own, the verification's, the boot check's); a failure there is one line too.

It never makes apt fail: it always exits 0, and each failure of its own (the venv gone, an unreadable state file, an
exception, the time limit, a bad argument such as `--time-limit nan`) prints one line. A hostile file where a library
or the dpkg database should be (a FIFO, a device node, a sparse ELF claiming a terabyte) is a finding of the check,
within its static time limit (three quarters of the hook's), never a hang: see verify/safe_read.py. The process is
modelled with a clean environment (no LD_LIBRARY_PATH, LD_PRELOAD, BNB_ROCM_VERSION): apt's environment says nothing
about the one users start Python in.

apt runs it through the installed verifier's launcher (`python3 -I -S /var/lib/rocm-fleet/verifier/launcher.py
apt-hook …`, verify/launcher.py), which hands it to `main` here: everything it imports from the verifier is imported
inside the guarded code, so whatever fails there is one line and exit status 0.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from pathlib import Path

PREFIX = "rocm-fleet apt hook:"  # = verify.launcher.PREFIXES["apt-hook"]: the launcher's refusal is a hook line
DEFAULT_STATE_DIR = "/var/lib/rocm-fleet/apt-hook"  # = verify.report.hook_state.DEFAULT_DIR (imported only when run)
DEFAULT_TIME_LIMIT = 60.0
MAX_TIME_LIMIT = 3600.0
RE_VERIFY = "re-verify with: pyinfra INVENTORY tasks/verify.py"
# The part of the inventory's question the hook asks (verify/question.py): the rest is fixed — static checks only.
QUESTION = ("venv", "expect_rocm", "expect_bitsandbytes", "root", "metrics_dir")


class _OneLine(Exception):
    """Stop the hook with this line (bad usage, time limit)."""


class _HookArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage and exit 2, which apt would count as a failure
        raise _OneLine(
            f"not run — {message} (the hook line in /etc/apt/apt.conf.d is wrong: run tasks/apt_hook.py again)"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from verify.question import Question  # imported here, not at the top: see the module docstring

    Question.add_arguments(parser, QUESTION)
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(DEFAULT_STATE_DIR),
        help=f"where the last result and the last passing one are kept (default {DEFAULT_STATE_DIR})",
    )
    parser.add_argument(
        "--time-limit",
        type=_time_limit,
        default=DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help="give up (with one line) after this long, so that apt never waits on the hook "
        f"(at most {MAX_TIME_LIMIT:g}; 0: no limit)",
    )
    parser.add_argument("--verbose", action="store_true", help="also print a line when nothing changed")


def _time_limit(text: str) -> float:
    from verify.commands import seconds  # imported here, not at the top: see the module docstring

    return seconds(MAX_TIME_LIMIT, zero_means="means no limit")(text)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "apt-hook",
        help="after a dpkg run: static checks, compare with the last result, warn when worse (always exit 0)",
        description=__doc__.splitlines()[0],
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def main(argv: list[str] | None = None) -> int:
    """The entry point apt uses: like `run`, but even bad arguments give one line and exit status 0."""
    parser = _HookArgumentParser(prog="apt-hook", description=__doc__.splitlines()[0])
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except _OneLine as stop:
        _emit([f"{PREFIX} {stop}"])
        return 0
    except SystemExit:  # --help
        raise
    except BaseException as error:  # noqa: BLE001 — whatever it is: still one line, still exit 0
        _emit([f"{PREFIX} not run ({_one_line(error)}); apt is not affected — run tasks/apt_hook.py again"])
        return 0
    return run(args)


def run(args: argparse.Namespace) -> int:
    try:
        _start_time_limit(args.time_limit)
        lines = hook(args)
    except BaseException as error:  # noqa: BLE001 — whatever happens here, apt must go on
        stop = _stop_in(error)
        lines = (
            [f"{PREFIX} {stop}"]
            if stop is not None
            else [f"{PREFIX} no check this time ({_one_line(error)}); apt is not affected — {RE_VERIFY}"]
        )
    finally:
        _stop_time_limit()
    _emit(lines)
    return 0


def hook(args: argparse.Namespace) -> list[str]:
    """Check, compare, keep the result; the lines to print."""
    from verify.checks.host import STATIC_TIME_LIMIT, CheckOptions
    from verify.commands.check import run_checks
    from verify.question import Question, QuestionError
    from verify.report.drift import compare_reports
    from verify.report.hook_state import HookResult, HookState, StateError
    from verify.report.report import ReportError
    from verify.stack.rocm_release import UnknownRelease
    from verify.stack.venv_layout import VenvError

    try:
        question = Question.from_args(args, QUESTION)
    except QuestionError as error:
        raise _OneLine(f"not run — {error} (fix the hook line: run tasks/apt_hook.py again)") from None
    static = {"root": question.root.resolve(), "device": "cpu", "gpu_required": False, "static_only": True}
    options = CheckOptions(
        **{**vars(question), **static},
        environ={},
        # Below the hook's own limit, so that a hostile or slow filesystem is a finding in the result, not this
        # hook's "took longer than its time limit" line.
        static_time_limit=(
            min(STATIC_TIME_LIMIT, args.time_limit * 0.75) if args.time_limit > 0 else STATIC_TIME_LIMIT
        ),
    )
    try:
        report = run_checks(options)
    except VenvError as error:
        raise _OneLine(f"no check — {error}") from None
    except UnknownRelease as error:
        raise _OneLine(f"not run — --expect-rocm: {error} (run tasks/apt_hook.py again)") from None

    lines: list[str] = []
    state = HookState(args.state_dir)
    try:
        previous = state.last()
    except StateError as error:
        lines.append(f"{PREFIX} {error}: this run's result replaces it")
        previous = None
    if previous is not None and _question(previous.report) != _question(report):
        lines.append(
            f"{PREFIX} the hook now checks {_describe_question(report)} (it checked "
            f"{_describe_question(previous.report)}): this result is the new baseline"
        )
        previous = None
    drift = None
    if previous is not None:
        try:
            drift = compare_reports(
                previous.report, report, baseline_label=f"the check after the previous dpkg run ({previous.checked_at})"
            )
        except (ReportError, KeyError, TypeError, AttributeError) as error:
            # A result of another verifier version, or hand-edited: replace it, or every later run would fail here.
            lines.append(
                f"{PREFIX} {state.last_path} is not shaped like a result of this verifier ({_one_line(error)}): "
                "this run's result replaces it"
            )
    try:
        state.record(HookResult(report.generated_at, report, drift.to_json() if drift else None))
    except OSError as error:
        lines.append(
            f"{PREFIX} could not keep this result in {args.state_dir} ({error.strerror or error}): the next "
            "run compares with an older one"
        )
    if question.metrics_dir is not None:
        lines += _write_metrics(question.metrics_dir, args.state_dir.parent)
    return lines + describe(report, drift, venv=str(args.venv), details=str(state.last_path), verbose=args.verbose)


def _write_metrics(directory: Path, kept_root: Path) -> list[str]:
    """Refresh the metrics file; one line when that fails (the check's own lines still follow)."""
    from verify.report.metrics import FILE_NAME, write_metrics

    try:
        write_metrics(directory, kept_root)
    except _OneLine:
        raise  # the time limit: the hook stops with its own line
    except Exception as error:  # noqa: BLE001 — the metrics must never cost apt the hook's message
        return [f"{PREFIX} could not write {directory / FILE_NAME} ({_one_line(error)}); apt is not affected"]
    return []


def describe(report, drift, *, venv: str, details: str, verbose: bool = False) -> list[str]:
    """What apt's output gets for this result, a report.Report (pure)."""
    return _describe_drift(report, drift, venv=venv, details=details, verbose=verbose) + reboot_lines(report)


def reboot_lines(report) -> list[str]:
    """One line while a reboot is pending: which kernel boots next, and whether it has amdgpu.ko."""
    kernel = getattr(report.facts, "kernel", None)
    if kernel is None or not kernel.reboot_pending:
        return []
    if kernel.next_boot is None:
        return [f"{PREFIX} reboot pending (no installed kernel found to boot next)"]
    has = "amdgpu.ko present" if kernel.next_boot_has_amdgpu else "NO amdgpu.ko: the GPU is gone after that reboot"
    return [f"{PREFIX} reboot pending: the next boot runs {kernel.next_boot} ({has}; {kernel.running or '?'} runs now)"]


def _describe_drift(report, drift, *, venv: str, details: str, verbose: bool = False) -> list[str]:
    verdict = report.verdict.upper()
    if drift is None:
        return [f"{PREFIX} baseline recorded for {venv}: {verdict} — {report.reason}"]
    if drift.got_worse:
        return (
            [f"{PREFIX} WARNING: this dpkg run made the ROCm setup of {venv} worse (check now {verdict}):"]
            + [f"{PREFIX}   {line}" for line in drift.lines()]
            + [f"{PREFIX} now {verdict}: {report.reason} — details in {details}; {RE_VERIFY}"]
        )
    if drift.changes:
        word = "cleared" if drift.better else "changed"
        return [f"{PREFIX} {word} by this dpkg run: {'; '.join(c.text for c in drift.ordered())} (check now {verdict})"]
    return [f"{PREFIX} no change ({verdict}: {report.reason})"] if verbose else []


def _question(report) -> dict:
    from verify.report.hook_state import SAME_QUESTION  # what makes two results comparable

    request = report.request.to_request()
    return {key: request[key] for key in SAME_QUESTION}


def _describe_question(report) -> str:
    asked = _question(report)
    where = "" if asked["root"] == "/" else f" under {asked['root']}"
    return f"{asked['venv']}{where} for ROCm {asked['expect_rocm']}, bitsandbytes {asked['expect_bitsandbytes']}"


def _stop_in(error: BaseException) -> _OneLine | None:
    """The _OneLine `error` is or was caused by: the time limit fires wherever the hook is, also inside code that
    wraps what it raises (an exception in a class body's __set_name__, while a module is imported, comes back as a
    RuntimeError caused by it)."""
    for _ in range(10):
        if error is None or isinstance(error, _OneLine):
            return error
        error = error.__cause__ or error.__context__
    return None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "no message"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}"


def _on_time_limit(signum, frame):
    raise _OneLine("no check this time — it took longer than its time limit; apt is not affected — " + RE_VERIFY)


def _start_time_limit(seconds: float) -> None:
    if seconds > 0:
        signal.signal(signal.SIGALRM, _on_time_limit)
        # A signal mask survives exec: started with SIGALRM blocked, the limit would never fire and apt would wait.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        signal.setitimer(signal.ITIMER_REAL, math.ceil(seconds * 1000) / 1000)


def _stop_time_limit() -> None:
    try:
        signal.setitimer(signal.ITIMER_REAL, 0)
    except (OSError, ValueError):
        pass


def _emit(lines: list[str]) -> None:
    try:
        # The report's text is the host's (the venv's file names are its owner's): nothing reaches the admin's
        # terminal as a control sequence.
        from verify.report.host_input import inert
    except BaseException:  # noqa: BLE001 — still one line each, and still inert

        def inert(text: str) -> str:
            return text.encode("unicode_escape").decode("ascii")

    try:
        # apt may run with a non-UTF-8 locale: an arrow must not cost the whole message.
        sys.stdout.reconfigure(errors="backslashreplace")
        for line in lines:
            sys.stdout.write(inert(line) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # apt's output closed: nothing to tell, and nothing to fail
        pass
