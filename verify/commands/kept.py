"""`python -m verify kept [--state-root DIR]` — what this host keeps under /var/lib/rocm-fleet, as one JSON document:
each kept result's text (read as hostile input: verify/report/kept_files.py), the host's name and its clock. The status
task's one question to a host; the controller parses and judges what it prints."""

from __future__ import annotations

import argparse
import json

from verify.commands import write_stdout
from verify.report.kept_files import STATE_ROOT, read_kept_files


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "kept", help="print the results this host keeps (the status task's question)", description=__doc__
    )
    parser.add_argument("--state-root", default=STATE_ROOT, help=f"where they are kept (default {STATE_ROOT})")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    write_stdout(json.dumps(read_kept_files(args.state_root)) + "\n")
    return 0
