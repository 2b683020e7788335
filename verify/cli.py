"""`python -m verify SUBCOMMAND …` — the command-line entry point (also the zipapp's).

Exit codes, for every subcommand: 0 all good, 1 something checked was found wrong, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Each name is a module in verify/commands/ (dashes become underscores) with register(subparsers).
COMMANDS = ("ldd", "process", "strays", "check", "apt-hook")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # `… | head` is not an error
        sys.stderr.close()
        return 0
