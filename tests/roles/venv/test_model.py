"""roles/venv/model.py: PEP 440 requirement checks (local versions included), the wheel platforms for a host, what
happens to an existing venv."""

from __future__ import annotations

import os
import platform

import pytest
from packaging import tags

from roles import pins
from roles.venv.model import (
    HostPython,
    VenvPlan,
    VenvState,
    model_check_requirements,
    plan_venv,
    requirement_met,
    unmet,
    wheel_platforms,
)


def test_wheel_platforms_equal_what_packaging_accepts_on_this_machine():
    # packaging's own platform_tags() for the running system is the oracle; this machine is glibc/x86_64.
    libc, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    assert libc == "glibc"
    expected = [tag for tag in tags.platform_tags() if tag.startswith("manylinux")]
    assert list(wheel_platforms(version, platform.machine())) == expected


def test_wheel_platforms_of_an_older_glibc():
    found = wheel_platforms("2.31", "x86_64")  # Ubuntu 20.04
    assert found[0] == "manylinux_2_31_x86_64" and found[-1] == "manylinux1_x86_64"
    assert "manylinux_2_34_x86_64" not in found and "manylinux2014_x86_64" in found
    assert "manylinux2014_aarch64" not in wheel_platforms("2.35", "aarch64")  # legacy aliases: x86 only here


def test_wheel_platforms_refuse_what_manylinux_does_not_know():
    with pytest.raises(ValueError, match="glibc 3.0"):
        wheel_platforms("3.0", "x86_64")


def test_host_python_tag():
    assert HostPython("3.11.2", "2.36", "x86_64").tag == "cp311-manylinux_2_36_x86_64"
    assert HostPython("3.12.3", "2.39", "x86_64").minor == "3.12"


@pytest.mark.parametrize(
    "spec, installed, met",
    [
        ("torch==2.13.0+rocm7.2", {"torch": "2.13.0+rocm7.2"}, True),  # what pyinfra's pip fact gets wrong
        ("torch==2.13.0+rocm7.2", {"torch": "2.13.0+cpu"}, False),
        ("torch==2.13.0+rocm7.2", {"torch": "2.13.0"}, False),
        ("torch==2.13.0", {"torch": "2.13.0+cpu"}, True),  # no local label in the spec: any build of 2.13.0
        ("torch==2.13.0", {"torch": "2.13.1+rocm7.2"}, False),
        ("torch>=2.13,<2.14", {"torch": "2.13.0+rocm7.2"}, True),
        ("bitsandbytes==0.50.1", {"bitsandbytes": "0.50.1"}, True),
        ("bitsandbytes==0.50.1", {"bitsandbytes": "0.50.1.dev0"}, False),
        ("Bitsandbytes==0.50.1", {"bitsandbytes": "0.50.1"}, True),  # names compare canonicalised
        ("torch==2.13.0", {}, False),
        ("torch==2.13.0", {"torch": "not a version"}, False),
    ],
)
def test_requirement_met(spec, installed, met):
    assert requirement_met(spec, installed) is met


def test_unmet_keeps_order():
    assert unmet(["torch==2.13.0+rocm7.2", "bitsandbytes==0.50.1"], {"torch": "2.13.0+cpu"}) == (
        "torch==2.13.0+rocm7.2",
        "bitsandbytes==0.50.1",
    )


def test_a_venv_of_another_account_or_with_its_files_is_replaced_never_chowned():
    host = HostPython("3.11.2", "2.36", "x86_64")
    assert plan_venv("/v", VenvState("3.11.2", "root"), host, "alice").action == "replace"
    foreign = VenvState("3.11.2", "alice", foreign="/v/lib/python3.11/site-packages/x.py")
    assert plan_venv("/v", foreign, host, "alice") == VenvPlan(
        "replace",
        "/v/lib/python3.11/site-packages/x.py in the venv does not belong to alice (an interrupted run as "
        "another account?): replacing the venv",
    )
    assert plan_venv("/v", VenvState("3.11.2", "alice"), host, "alice").action is None


def test_the_model_check_adds_transformers_and_accelerate_at_their_pins_unless_it_is_off():
    assert model_check_requirements("off") == ()
    for verify_model in ("synthetic", "/srv/models/llama-13b"):
        assert model_check_requirements(verify_model) == (
            f"transformers=={pins.TRANSFORMERS_VERSION}",
            f"accelerate=={pins.ACCELERATE_VERSION}",
        )
