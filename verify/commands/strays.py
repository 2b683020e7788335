"""`python -m verify strays [--root DIR] [--expect-rocm X.Y.Z] [--json]` — distro-archive ROCm packages installed,
what needs them, and which ship a SONAME a consumer of that ROCm release (default: the newest this verifier knows) could
bind to. Exit 0: none; 1: strays found; 2: no usable dpkg database, or a release this verifier does not know."""

from __future__ import annotations

import argparse

from verify.commands import say, write_result
from verify.debian.dpkg import DpkgDatabaseError
from verify.debian.strays import StraysReport, find_strays
from verify.stack.rocm_release import UnknownRelease, newest_release, rocm_release


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "strays",
        help="report distro-archive ROCm packages (Debian/Ubuntu) installed",
        description=__doc__,
    )
    parser.add_argument("--root", default="/", help="root of the system to read (a chroot, a mounted image); default /")
    parser.add_argument(
        "--expect-rocm",
        metavar="X.Y.Z",
        help="the ROCm release whose SONAMEs count as binding risks (default: the newest known)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (schema verify.strays/1)")
    parser.set_defaults(run=run)


def format_text(report: StraysReport) -> str:
    where = "" if report.root == "/" else f" under {report.root}"
    if not report.strays:
        return f"No distro-archive ROCm packages installed{where}.\n"
    lines = [f"{len(report.strays)} distro-archive ROCm package(s) installed{where}:"]
    for stray in report.strays:
        lines.append(f"  {stray.describe()}")
        for dependent in stray.dependents:
            how = "needs it" if dependent.needs_it else f"could use {', '.join(dependent.alternatives)} instead"
            lines.append(f"      {dependent.field} of {dependent.package}: {dependent.relation} ({how})")
        for library in stray.libraries:
            mark = "  <- ROCm 7.2 SONAME" if library.rocm_7_2_soname else ""
            if library.soname:
                soname = library.soname
            else:
                soname = f"no SONAME ({library.error})" if library.error else "no SONAME"
            lines.append(f"      {library.path}: {soname}{mark}")
        if stray.file_list_missing:
            lines.append("      (dpkg has no file list for it: its libraries could not be checked)")
    if report.binding_risk:
        names = ", ".join(soname for stray in report.binding_risk for soname in stray.rocm_7_2_sonames)
        lines.append(f"A ROCm 7.2 consumer could bind to {names} from these packages instead of ROCm 7.2's own.")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        release = rocm_release(args.expect_rocm) if args.expect_rocm else newest_release()
    except UnknownRelease as error:
        say(f"strays: --expect-rocm: {error}", error=True)
        return 2
    try:
        report = find_strays(args.root, sonames=release.sonames)
    except DpkgDatabaseError as error:
        say(f"strays: {error}", error=True)
        return 2
    write_result(args.json, report.to_json, lambda: format_text(report))
    return 1 if report.strays else 0
