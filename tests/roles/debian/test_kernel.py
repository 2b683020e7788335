"""roles/debian/kernel.py: the KernelDriver fact's model — what boots next, what is pending, which of AMD's kernel
prerequisites the ROCm stage installs — on the recorded outputs of tests/roles/debian/facts/KernelDriver/."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest

from roles.debian import facts
from roles.debian.kernel import FIRMWARE_PACKAGE
from tests.support.operation_cases import process_fact, run_fact_here

CASES = Path(__file__).parent / "facts" / "KernelDriver"


def _case(name: str):
    return process_fact(facts.KernelDriver, json.loads((CASES / f"{name}.json").read_text())["output"])


def test_an_ubuntu_cloud_image_whose_meta_package_left_out_modules_extra():
    kernels = _case("ubuntu_noble_upgrade_without_modules_extra")
    assert kernels.installed == ("6.8.0-49-generic", "6.8.0-51-generic")
    assert kernels.next_boot == "6.8.0-51-generic" and kernels.reboot_pending
    assert kernels.has_amdgpu("6.8.0-49-generic") and not kernels.has_amdgpu("6.8.0-51-generic")
    # The running kernel has its headers and modules-extra; the next one lacks modules-extra (and apt has it).
    assert kernels.driver_packages_wanted() == ("linux-modules-extra-6.8.0-51-generic",)
    assert kernels.meta_statement().startswith("linux-virtual does not bring linux-modules-extra: the kernels it brings have no amdgpu.ko")


def test_debian_needs_headers_only_and_a_blacklist_is_found():
    kernels = _case("debian12_blacklisted")
    assert not kernels.split_modules and not kernels.reboot_pending
    assert kernels.driver_packages_wanted() == ()  # linux-headers-6.1.0-57-amd64 is installed already
    assert [b.describe() for b in kernels.blocks] == ["'blacklist amdgpu' in /etc/modprobe.d/blacklist-gpu.conf:3"]


def test_the_command_on_this_machine_agrees_with_python():
    kernels = run_fact_here(facts.KernelDriver)
    assert kernels.running == platform.release()
    assert kernels.loaded == os.path.isdir("/sys/module/amdgpu") and kernels.kfd == os.path.exists("/dev/kfd")
    assert set(kernels.amdgpu) == {p.name for p in Path("/lib/modules").glob("*") if p.is_dir()}
    assert kernels.reboot_required == os.path.exists("/run/reboot-required")


def test_which_kernel_packages_apt_knows_is_what_apt_cache_says_of_each_name(tmp_path):
    """The fact asks apt once for the names (running and newest kernel × headers, modules-extra; Debian's amdgpu
    firmware); the oracle is this machine's real apt-cache asked name by name. The running kernel is made one apt has
    packages for, through a `uname` first on PATH."""
    names = subprocess.run(["apt-cache", "pkgnames", "linux-headers-"], capture_output=True, text=True).stdout.split()
    releases = sorted(n.removeprefix("linux-headers-") for n in names if re.fullmatch(r"linux-headers-\d[\w.+~-]*", n))
    if not releases:
        pytest.skip("this machine's apt knows no linux-headers-<release> package (no apt lists)")
    release = releases[-1]
    fake = tmp_path / "uname"
    fake.write_text(f"#!/bin/sh\necho {release}\n")
    fake.chmod(0o755)
    command = facts.KernelDriver().command()
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    kernels = process_fact(facts.KernelDriver, done.stdout.splitlines())
    assert kernels.running == release
    newest = sorted(p.name.removeprefix("vmlinuz-") for p in Path("/boot").glob("vmlinuz-*"))
    wanted = {f"linux-{kind}-{k}" for k in {release, *newest[-1:]} for kind in ("headers", "modules-extra")}
    wanted.add(FIRMWARE_PACKAGE)
    # A record, not the exit status: apt-cache exits 0 for a name apt knows only as referenced by another package,
    # with no version to install (firmware-amd-graphics without Debian's non-free-firmware component).
    oracle = {name for name in wanted
              if f"Package: {name}\n" in subprocess.run(["apt-cache", "show", "--no-all-versions", name],
                                                         capture_output=True, text=True).stdout}
    assert f"linux-headers-{release}" in oracle
    assert kernels.available == oracle
