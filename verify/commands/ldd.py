"""`python -m verify ldd [--root DIR] [--library-path PATHS] [--json] FILE` — a safe ldd: nothing is executed.

Prints glibc ldd's lines in load order (see verify/ld/lddview.py for the two deliberate differences: no load addresses,
no vDSO line). Exit 0 when everything is found, 1 when something is missing or a file is broken, 2 when FILE itself
cannot be analysed. LD_LIBRARY_PATH is taken from the environment, as ldd does, unless --library-path is given (with
--root it is ignored: the host's environment says nothing about the image).
"""

from __future__ import annotations

import json
import os

from verify.commands import say, write_stdout
from verify.ld.elf import ElfError
from verify.ld.lddview import ldd_lines
from verify.ld.process import Analyser


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ldd",
        help="which file the loader maps for each library FILE needs, and why",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("file", metavar="FILE")
    add_common_options(parser)
    parser.set_defaults(run=run)


def add_common_options(parser) -> None:
    parser.add_argument(
        "--root",
        default="/",
        metavar="DIR",
        help="analyse the filesystem image under DIR (a chroot, a mounted disk) instead of /",
    )
    parser.add_argument(
        "--library-path",
        default=None,
        metavar="PATHS",
        help="LD_LIBRARY_PATH of the analysed process (default: this environment's, none with --root)",
    )
    parser.add_argument("--json", action="store_true", help="print the whole analysis as JSON")


def library_path_of(args) -> str | None:
    if args.library_path is not None:
        return args.library_path
    return None if args.root not in ("", "/") else os.environ.get("LD_LIBRARY_PATH")


def run(args) -> int:
    if not os.path.isdir(args.root):
        say(f"verify ldd: --root {args.root}: not a directory (give the image's top directory)", error=True)
        return 2
    try:
        analyser = Analyser(args.root)
        image = analyser.resolve(args.file, library_path=library_path_of(args))
    except ElfError as error:
        say(f"verify ldd: {error} (give an ELF executable or shared library)", error=True)
        return 2
    lines = ldd_lines(image)
    if args.json:
        document = image.to_json()
        document["ldd"] = [line.lstrip("\t") for line in lines]
        write_stdout(json.dumps(document, indent=2) + "\n")
    else:
        write_stdout(("\n".join(lines) if lines else "\tstatically linked") + "\n")
        for finding in image.findings:
            say(f"verify ldd: {finding.message}", error=True)
    return 0 if image.ok else 1
