"""What the inventory asks of a host's verifier, and where its reports go on the controller.

`question_for(settings)` is the host's question (verify/question.py): the verification stage asks it (`verify check`'s
arguments: `check_arguments`), the boot unit asks it once per boot, the apt hook its static part, and the status task
holds every kept report to it (`question.to_request()`: a report answering anything else proves nothing).
`reports_dir_for(settings)` is the controller's directory for reports and the fleet summary.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import state

from roles.settings import HostSettings
from verify.question import Question
from verify.report.kept_files import STATE_ROOT


def question_for(settings: HostSettings) -> Question:
    """The question this host's settings ask."""
    metrics = settings.node_exporter_textfile_dir
    return Question(
        venv=Path(settings.venv_path),
        expect_rocm=settings.rocm_release,
        expect_bitsandbytes=settings.bitsandbytes_version,
        device=settings.verify_device,
        gpu_required=settings.gpu_required,
        torch_label=settings.torch_label,
        # ROCm comes from AMD's repositories: their pin and lists are checked.
        expect_amd_repo=settings.rocm_install == "install",
        model=settings.verify_model,
        probe_user=settings.venv_owner,  # the venv's code runs as its owner
        metrics_dir=Path(metrics) if metrics else None,
    )


def check_arguments(settings: HostSettings) -> list[str]:
    """`verify check` arguments for this host's settings; the report is kept on the host too (the status task reads
    it back from /var/lib/rocm-fleet/last-verify.json)."""
    return ["check", *question_for(settings).to_argv(), "--keep-in", STATE_ROOT, "--json"]


def reports_dir_for(settings: HostSettings) -> Path:
    path = Path(settings.reports_dir)
    return path if path.is_absolute() else Path(state.cwd or ".") / path
