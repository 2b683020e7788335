"""`python -m verify kept [--state-root DIR]` — what this host keeps under /var/lib/rocm-fleet, as one JSON document:
each kept result's text (read as hostile input: verify/report/kept_files.py), the host's name and its clock — and what
a reader needs to tell what those results cannot see: the running boot's id (verify/system/boot_id.py) and the
changes dpkg logged lately (verify/debian/dpkg_log.py). The status task's one question to a host; the controller
parses and judges what it prints."""

from __future__ import annotations

import argparse
import json

from verify.commands import write_stdout
from verify.debian.dpkg_log import LOG, STATUS, recent_changes
from verify.report.kept_files import STATE_ROOT, read_kept_files
from verify.system.boot_id import boot_id


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "kept", help="print the results this host keeps (the status task's question)", description=__doc__
    )
    parser.add_argument("--state-root", default=STATE_ROOT, help=f"where they are kept (default {STATE_ROOT})")
    parser.add_argument("--dpkg-log", default=LOG, help=f"dpkg's log (default {LOG})")
    parser.add_argument("--dpkg-status", default=STATUS, help=f"dpkg's database (default {STATUS})")
    parser.set_defaults(run=run)


def answer(args: argparse.Namespace) -> dict:
    return {
        **read_kept_files(args.state_root),
        "boot_id": boot_id(),
        "dpkg": recent_changes(args.dpkg_log, args.dpkg_status),
    }


def run(args: argparse.Namespace) -> int:
    write_stdout(json.dumps(answer(args)) + "\n")
    return 0
