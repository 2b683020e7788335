"""`python -m verify SUBCOMMAND …` — the command-line entry point (on a host: the launcher's, verify/launcher.py).

Exit codes, for every subcommand: 0 all good, 1 something checked was found wrong, 2 bad usage or input — one line
on stderr, also for a bad argument (argparse's usage block is left out: `--help` shows it) and for output that cannot
be written (`> /dev/full`). A closed pipe (`… | head`) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Each name is a module in verify/commands/ (dashes become underscores) with register(subparsers).
COMMANDS = ("ldd", "process", "strays", "check", "apt-hook", "boot-check", "kept")


class _OneLineParser(argparse.ArgumentParser):
    """Bad usage is one line and exit 2 (subcommand parsers are of this class too: argparse makes them so)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with just the command `only`.

    A run imports the module of the command it runs and no other: `verify ldd FILE` need not import what `check`
    needs (the runtime probe, the dpkg database, the report schema), which cost it more than the analysis itself."""
    parser = _OneLineParser(prog="python -m verify", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        module_name = f"verify.commands.{name.replace('-', '_')}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue  # not written yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The entry point of a verifier process (`python -m verify`, the installed verifier's launcher)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["apt-hook"]:  # its own entry: even bad arguments are one line and exit status 0 (apt goes on)
        from verify.commands.apt_hook import main as apt_hook

        return apt_hook(argv[1:])
    # The command word comes first (there are no options before it); anything else — --help, a typo — gets the
    # parser with every command, for the full list of choices.
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    from verify.commands import OutputError

    try:
        return args.run(args)
    except BrokenPipeError:  # `… | head` is not an error
        _discard_stdout()
        return 0
    except OutputError as error:
        _discard_stdout()
        print(f"verify {args.command}: cannot write the output ({error})", file=sys.stderr)
        return 2


def _discard_stdout() -> None:
    """Python flushes stdout once more at exit, which would fail again with a traceback-like message: point it at
    /dev/null, so what is left in its buffer has somewhere to go."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
