"""What the verification stage asks of a host's verifier, and where its reports go on the controller.

`check_arguments(settings)` are the arguments of `verify check` for a host's settings; `expected_request(settings)`
is the "request" a report answering exactly those arguments states (a report answering anything else proves nothing);
`reports_dir_for(settings)` is the controller's directory for reports and the fleet summary.

Kept apart from deploy.py (the stage itself, with its upload of the verifier and the report's bookkeeping) so that the
status task, which judges each host's kept report against the same request, imports only this.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import state

from roles.settings import HostSettings
from verify.report.kept_files import STATE_ROOT as KEPT_STATE_ROOT


def check_arguments(settings: HostSettings) -> list[str]:
    """`verify check` arguments for this host's settings."""
    arguments = [
        "check",
        "--venv",
        settings.venv_path,
        "--expect-rocm",
        settings.rocm_release,
        "--expect-bitsandbytes",
        settings.bitsandbytes_version,
        "--device",
        settings.verify_device,
        "--probe-user",
        settings.venv_owner,
        # Keep the report on the host too (/var/lib/rocm-fleet/last-verify.json): the status task reads it back.
        "--keep-in",
        KEPT_STATE_ROOT,
        "--model",
        settings.verify_model,
        "--json",
    ]
    if settings.node_exporter_textfile_dir:
        arguments[-1:-1] = ["--metrics-dir", settings.node_exporter_textfile_dir]
    if not settings.gpu_required:
        arguments.insert(-1, "--no-gpu-required")
    if settings.torch_label:
        arguments[-1:-1] = ["--torch-label", settings.torch_label]
    if settings.rocm_install == "install":  # ROCm comes from AMD's repositories: their pin and lists are checked
        arguments.insert(-1, "--expect-amd-repo")
    return arguments


def expected_request(settings: HostSettings) -> dict:
    """The report's "request" for `check_arguments(settings)`: a report answering anything else proves nothing."""
    return {
        "venv": settings.venv_path,
        "expect_rocm": settings.rocm_release,
        "expect_bitsandbytes": settings.bitsandbytes_version,
        "device": settings.verify_device,
        "gpu_required": settings.gpu_required,
        "static_only": False,
        "root": "/",
        "torch_label": settings.torch_label,
        "expect_amd_repo": settings.rocm_install == "install",
        "model": settings.verify_model,
    }


def reports_dir_for(settings: HostSettings) -> Path:
    path = Path(settings.reports_dir)
    return path if path.is_absolute() else Path(state.cwd or ".") / path
