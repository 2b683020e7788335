"""`python -m verify SUBCOMMAND …` — the command-line entry point (also the zipapp's).

Exit codes, for every subcommand: 0 all good, 1 something checked was found wrong, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from verify.oneshot import one_command_process

# Each name is a module in verify/commands/ (dashes become underscores) with register(subparsers).
COMMANDS = ("ldd", "process", "strays", "check", "apt-hook", "boot-check")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with just the command `only`.

    A run imports the module of the command it runs and no other: `verify ldd FILE` need not import what `check`
    needs (the runtime probe, the dpkg database, the report schema), which cost it more than the analysis itself."""
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__.splitlines()[0])
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
    """The entry point of a verifier process (`python -m verify`, the zipapp): see verify/oneshot.py."""
    with one_command_process():
        argv = sys.argv[1:] if argv is None else argv
        # The command word comes first (there are no options before it); anything else — --help, a typo — gets the
        # parser with every command, for the full list of choices.
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args = parser.parse_args(argv)
        try:
            return args.run(args)
        except BrokenPipeError:  # `… | head` is not an error
            sys.stderr.close()
            return 0
