"""roles/verification/request.py: what the verification stage asks of a host's verifier, from its settings (pure).
A real report answering these arguments: tests/roles/verification/test_deploy.py."""

from __future__ import annotations

from roles.settings import check_data
from roles.verification.request import check_arguments, expected_request

LABEL = "torch 2.13.0 CPU, stand-in for the ROCm wheel"


def settings(**data):
    found, problems = check_data("ws1", data)
    assert not problems, problems
    return found


def test_check_arguments_follow_the_inventory():
    default = check_arguments(settings())
    # The report is also kept on the host (for the status task), and the metrics file refreshed.
    assert default == [
        "check",
        "--venv",
        "/opt/rocm-fleet/venv",
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--device",
        "auto",
        "--probe-user",
        "root",
        "--keep-in",
        "/var/lib/rocm-fleet",
        "--model",
        "synthetic",
        "--metrics-dir",
        "/var/lib/prometheus/node-exporter",
        "--expect-amd-repo",
        "--json",
    ]
    test_fleet = check_arguments(
        settings(
            verify_device="cpu",
            gpu_required=False,
            venv_path="/srv/venv",
            torch_label=LABEL,
            rocm_install="skip",
            node_exporter_textfile_dir=None,
        )
    )
    assert test_fleet[-11:] == [
        "cpu",
        "--probe-user",
        "root",
        "--keep-in",
        "/var/lib/rocm-fleet",
        "--model",
        "synthetic",
        "--no-gpu-required",
        "--torch-label",
        LABEL,
        "--json",
    ]
    assert "/srv/venv" in test_fleet and "--metrics-dir" not in test_fleet
    assert "/srv/metrics" in check_arguments(settings(node_exporter_textfile_dir="/srv/metrics"))
    # ROCm from AMD's repositories (rocm_install: install): their pin and lists are checked (apt.pin, apt.lists).
    assert "--expect-amd-repo" in default and "--expect-amd-repo" not in test_fleet
    # The venv's code runs as its owner: the verifier, root, is told whom.
    owned = check_arguments(settings(venv_owner="alice"))
    assert owned[owned.index("--probe-user") + 1] == "alice"
    # The model check: what verify_model says, passed as it is (off, synthetic or a checkpoint directory).
    for model in ("off", "/srv/models/llama-13b"):
        asked = check_arguments(settings(verify_model=model))
        assert asked[asked.index("--model") + 1] == model


def test_the_expected_request_is_what_the_check_arguments_ask():
    """A report answering these arguments states exactly this request (the real verifier's, on the torch-cpu venv,
    is compared in test_verify_task_reports_fails_the_host_with_one_line_and_summarises_the_fleet)."""
    found = expected_request(
        settings(verify_device="cpu", gpu_required=False, venv_path="/srv/venv", torch_label=LABEL)
    )
    assert found == {
        "venv": "/srv/venv",
        "expect_rocm": "7.2.4",
        "expect_bitsandbytes": "0.50.1",
        "device": "cpu",
        "gpu_required": False,
        "static_only": False,
        "root": "/",
        "torch_label": LABEL,
        "expect_amd_repo": True,
        "model": "synthetic",
    }
    assert expected_request(settings(rocm_install="skip"))["expect_amd_repo"] is False
