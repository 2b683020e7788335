"""`python -m verify process --exe PATH --dlopen LIB [--dlopen LIB …] [--root DIR] [--library-path PATHS] [--json]`

The process model: PATH starts, then dlopen()s each LIB in order (a path, as Python's extension imports pass, or a bare
name searched with the caller's paths; `--dlopen-from CALLER LIB` names the calling object, e.g. _ctypes' module for
ctypes.CDLL("libx.so")). Shows, for every object, where it came from, and for every later request what already-loaded
object it bound to (e.g. bitsandbytes' libgomp.so.1 -> torch/lib/libgomp.so.1). Exit 0 when everything is found, 1
when something is missing or a file is broken, 2 when the executable cannot be analysed.
"""

from __future__ import annotations

import argparse
import os

from verify.commands import say, write_result
from verify.commands.ldd import add_common_options, library_path_of
from verify.ld import image as m
from verify.ld.elf import ElfError
from verify.ld.process import Analyser, Dlopen


class _AppendDlopen(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        calls = list(getattr(namespace, self.dest) or [])
        if isinstance(values, list):
            caller, name = values
            calls.append(Dlopen(name, caller))
        else:
            calls.append(Dlopen(values))
        setattr(namespace, self.dest, calls)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "process", help="the process model: an executable plus its dlopen()s", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--exe", required=True, metavar="PATH", help="the program the process starts from")
    parser.add_argument(
        "--dlopen",
        dest="dlopens",
        action=_AppendDlopen,
        default=[],
        metavar="LIB",
        help="a dlopen() from the executable, in order (repeatable)",
    )
    parser.add_argument(
        "--dlopen-from",
        dest="dlopens",
        action=_AppendDlopen,
        nargs=2,
        metavar=("CALLER", "LIB"),
        help="a dlopen() whose calling code is in the loaded object CALLER",
    )
    add_common_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    if not os.path.isdir(args.root):
        say(f"verify process: --root {args.root}: not a directory (give the image's top directory)", error=True)
        return 2
    try:
        image = Analyser(args.root).resolve_process(args.exe, args.dlopens, library_path=library_path_of(args))
    except ElfError as error:
        say(f"verify process: {error} (give the ELF executable the process starts from)", error=True)
        return 2
    write_result(args.json, image.to_json, lambda: "\n".join(describe(image)) + "\n")
    return 0 if image.ok else 1


def describe(image: m.ProcessImage) -> list[str]:
    lines = [f"objects mapped, in load order ({len(image.objects)}):"]
    for obj in image.objects:
        asked = f" <- {obj.requested_as} from {obj.requested_by}" if obj.requested_by else ""
        lines.append(f"  {obj.path}  [{obj.via}]{asked}")
    lines.append("requests (those bound by plain name to an object loaded for the same name are left out):")
    for request in image.requests:
        if request.outcome == m.ALREADY_LOADED and request.matched_by == m.BY_NAME and request.kind == "needed":
            continue
        lines.append(f"  {'dlopen ' if request.kind == 'dlopen' else ''}{request.describe()}")
    for finding in image.findings:
        lines.append(f"finding: {finding.message}")
    missing = image.missing
    lines.append(f"{len(missing)} missing" if missing else "everything found")
    return lines
