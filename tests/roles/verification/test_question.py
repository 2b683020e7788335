"""The question a host's settings ask (roles/verifier.py `question_for`, verify/question.py), and the verification
stage's arguments derived from it (roles/verification/deploy.py `check_arguments`). A real report answering them:
tests/roles/verification/test_deploy.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from roles.settings import check_data
from roles.verification.deploy import check_arguments
from roles.verifier import question_for
from verify.question import Question

LABEL = "torch 2.13.0 CPU, stand-in for the ROCm wheel"


def settings(**data):
    found, problems = check_data("ws1", data)
    assert not problems, problems
    return found


def test_the_question_follows_the_inventory():
    assert question_for(settings()) == Question(
        venv=Path("/opt/rocm-fleet/venv"),
        expect_rocm="7.2.4",
        expect_bitsandbytes="0.50.1",
        device="auto",
        gpu_required=True,
        torch_label=None,
        expect_amd_repo=True,  # ROCm from AMD's repositories (rocm_install: install): their pin and lists
        model="synthetic",
        probe_user="root",  # the venv's code runs as its owner: the verifier, root, is told whom
        metrics_dir=Path("/var/lib/prometheus/node-exporter"),
    )
    test_fleet = question_for(
        settings(
            verify_device="cpu",
            gpu_required=False,
            venv_path="/srv/venv",
            torch_label=LABEL,
            rocm_install="skip",
            node_exporter_textfile_dir=None,
            venv_owner="alice",
            verify_model="/srv/models/llama-13b",
        )
    )
    assert (test_fleet.venv, test_fleet.device, test_fleet.gpu_required, test_fleet.torch_label) == (
        Path("/srv/venv"),
        "cpu",
        False,
        LABEL,
    )
    assert (test_fleet.expect_amd_repo, test_fleet.metrics_dir, test_fleet.probe_user, test_fleet.model) == (
        False,
        None,
        "alice",
        "/srv/models/llama-13b",
    )


def test_check_arguments_are_the_question_then_where_the_report_is_kept():
    assert check_arguments(settings()) == [
        "check",
        "--venv",
        "/opt/rocm-fleet/venv",
        "--expect-rocm",
        "7.2.4",
        "--expect-bitsandbytes",
        "0.50.1",
        "--device",
        "auto",
        "--expect-amd-repo",
        "--model",
        "synthetic",
        "--probe-user",
        "root",
        "--metrics-dir",
        "/var/lib/prometheus/node-exporter",
        "--keep-in",
        "/var/lib/rocm-fleet",
        "--json",
    ]
    test_fleet = check_arguments(
        settings(verify_device="cpu", gpu_required=False, torch_label=LABEL, node_exporter_textfile_dir=None)
    )
    assert test_fleet[7:14] == [
        "--device",
        "cpu",
        "--no-gpu-required",
        "--torch-label",
        LABEL,
        "--expect-amd-repo",
        "--model",
    ]
    assert "--metrics-dir" not in test_fleet


def test_the_host_reads_back_the_question_the_controller_asked():
    """Both directions from one definition: the verifier's own parser (verify check's) turns the controller's argv
    into the same question, for every setting that changes it."""
    from verify.commands.check import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for data in (
        {},
        {"verify_device": "cpu", "gpu_required": False, "torch_label": LABEL, "rocm_install": "skip"},
        {"venv_owner": "alice", "verify_model": "off", "node_exporter_textfile_dir": None},
    ):
        asked = question_for(settings(**data))
        assert Question.from_args(parser.parse_args(asked.to_argv())) == asked


def test_the_reports_request_is_the_question_less_what_no_report_states():
    """What a report answering these arguments states (the real verifier's, on the torch-cpu venv: test_deploy.py)."""
    asked = question_for(settings(verify_device="cpu", gpu_required=False, venv_path="/srv/venv", torch_label=LABEL))
    assert asked.to_request() == {
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
    assert Question.from_request(asked.to_request()) == Question(
        **{**vars(asked), "probe_user": None, "metrics_dir": None}
    )
