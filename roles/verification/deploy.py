"""The verification stage as a pyinfra deploy: install the verifier, run every check on the host, keep the report.

Changes nothing on the host but the installed verifier (`roles.verifier`) and what the verifier keeps of its run: the
report, as /var/lib/rocm-fleet/last-verify.json (read back by the status task), and node_exporter's rocm_fleet.prom
when `node_exporter_textfile_dir` is set and exists. The checks only read files and run the venv's python (with -B, so
not even a .pyc is written) — as `venv_owner` (`--probe-user`), never as root for a venv another account owns: the
verifier runs as root, the code in the venv is its owner's. It runs this checkout's installed version, held to its
rule first (`verifier_command`; a refusal prints nothing on stdout, which `reports.py` reads strictly). On the
controller `collect_report` (reports.py) judges what the host printed and writes reports/<host>.json, and when the run
ends the fleet summary is written (`fleet.py`). A host passes only on a report that proves it (`reports.py`, and the
rule in verify/report/report.py); a host whose verdict is "fail" is failed with the report's one-line reason, a host
whose output proves nothing with one line saying what was wrong. pyinfra then runs nothing more on it and exits 1.
"""

from __future__ import annotations

import shlex

from pyinfra import host, state
from pyinfra.operations import python, server

from roles.settings import HostSettings
from roles.stage import stage
from roles.verification.fleet import fleet_summary, reports_dir_for
from roles.verification.reports import EXIT_MARKER, HOST_MARKER, collect_report
from roles.verifier import install_reads, install_verifier, question_for, verifier_command
from verify.report.kept_files import STATE_ROOT


def check_arguments(settings: HostSettings) -> list[str]:
    """`verify check` arguments for this host's settings (`question_for`, roles/verifier.py); the report is kept on the
    host too (the status task reads it back from /var/lib/rocm-fleet/last-verify.json)."""
    return ["check", *question_for(settings).to_argv(), "--keep-in", STATE_ROOT, "--json"]


def remote_command(settings: HostSettings) -> str:
    """The host's own name first (the report must carry it), then the report; the verifier's exit status goes to
    stdout as the last line, so this step succeeds and the judging happens on the controller with the report in hand
    (a failed check is a verdict to report, not a broken command)."""
    return (
        f'echo {shlex.quote(HOST_MARKER)}"$(uname -n)"; {verifier_command(*check_arguments(settings))}; '
        f"echo {shlex.quote(EXIT_MARKER)}$?"
    )


def join_fleet_summary(settings: HostSettings) -> None:
    """Register the run's fleet summary (the first host does) and this host's torch label — also on a host an earlier
    stage stopped, whose row then says where it failed."""
    fleet_summary(state, reports_dir_for(settings)).note_label(host.name, settings.torch_label)


@stage("Verify", every_host=join_fleet_summary, reads=lambda settings: install_reads())
def verify(settings: HostSettings) -> None:
    install_verifier(settings.dpkg_lock_timeout)
    device = "on the CPU (not a GPU pass)" if settings.verify_device == "cpu" else "on every GPU"
    model = "" if settings.verify_model == "off" else ", the 4-bit model"
    run = server.shell(
        name=f"Run the verifier: linkage, versions, strays, runtime, NF4{model} {device}",
        commands=[remote_command(settings)],
    )
    python.call(
        name="Save the report, judge the host",
        function=collect_report,
        run=run,
        reports_dir=str(reports_dir_for(settings)),
        torch_label=settings.torch_label,
        request=question_for(settings).to_request(),
    )
