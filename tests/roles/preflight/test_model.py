"""roles/preflight/model.py: the verdict on a host from its facts — fit hosts pass with a summary, each kind of unfit
host gets one problem that says what is wrong and what to do."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from roles.debian.os_support import parse_os_release
from roles.preflight.model import (
    FreeSpace,
    PreflightInput,
    check,
    disk_needs,
    parse_free_space,
    parse_gpu_inventory,
)

FACTS = (Path(__file__).parent / "facts", Path(__file__).parents[1] / "debian" / "facts")  # OsReleaseFile: shared
GB = 10**9


def _output(fact: str, case: str) -> list[str]:
    folder = next(facts / fact for facts in FACTS if (facts / fact).is_dir())
    return json.loads((folder / f"{case}.json").read_text())["output"]


def _host(**changes) -> PreflightInput:
    base = PreflightInput(
        os_release=parse_os_release(_output("OsReleaseFile", "ubuntu_noble")),
        rocm_install="install",
        rocm_pending=True,
        rocm_release="7.2.4",
        gpu_required=True,
        gpus=parse_gpu_inventory(_output("GpuDevices", "ryzen_rx7900xt")),
        needs=disk_needs(50, True, "/opt/rocm-fleet/venv"),
        free=(FreeSpace("/opt", "/", 200 * GB), FreeSpace("/opt/rocm-fleet/venv", "/", 200 * GB)),
        required_users=("maria", "root"),
        existing_users=frozenset({"maria", "root"}),
    )
    return replace(base, **changes)


def test_fit_workstation_summary_names_os_gpus_and_disk():
    verdict = check(_host())
    assert verdict.fit, verdict.problems
    assert verdict.summary == (
        "Ubuntu 24.04.2 LTS (noble); 2 AMD GPU(s): 0000:03:00.0 0x744c, 0000:0e:00.0 0x164e; 200 GB free on /"
    )


def test_amd_audio_functions_and_cpu_bridges_are_not_gpus():
    gpus = parse_gpu_inventory(_output("GpuDevices", "ryzen_rx7900xt"))
    assert [d.slot for d in gpus.amd_gpus] == ["0000:03:00.0", "0000:0e:00.0"]
    assert [d.slot for d in parse_gpu_inventory(_output("GpuDevices", "instinct_mi300x")).amd_gpus] == ["0000:05:00.0"]


SUPPORTED = (
    "(supported: Ubuntu 24.04 (noble), Ubuntu 22.04 (jammy), Debian 12 (bookworm); Debian 13 only with "
    "rocm_install: skip): provision a supported OS"
)


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("ubuntu_focal", "Ubuntu 20.04.6 LTS (focal)"),
        ("no_file", "an OS without /etc/os-release"),
    ],
)
def test_unsupported_os_is_one_problem_saying_what_is_supported(case, named):
    verdict = check(_host(os_release=parse_os_release(_output("OsReleaseFile", case))))
    assert verdict.problems == (f"{named} is not supported {SUPPORTED}",)


def test_debian_13_needs_rocm_install_skip():
    trixie = parse_os_release(
        ["ID=debian", 'VERSION_ID="13"', "VERSION_CODENAME=trixie", 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"']
    )
    assert check(_host(os_release=trixie)).problems == (
        "Debian GNU/Linux 13 (trixie) (trixie): Debian 13 is for test fleets: every stage but AMD's installer (set "
        "rocm_install: skip)",
    )
    assert check(_host(os_release=trixie, rocm_install="skip", rocm_pending=False)).fit


def test_debian_12_takes_the_jammy_packages():
    bookworm = parse_os_release(_output("OsReleaseFile", "debian_bookworm"))
    assert check(_host(os_release=bookworm)).fit


def test_no_gpu_and_driver_not_loaded():
    none = check(_host(gpus=parse_gpu_inventory(_output("GpuDevices", "this_machine_no_gpu"))))
    assert none.problems == (
        "no AMD GPU found (no PCI display or accelerator device of vendor 0x1002): install one, "
        "or set gpu_required: False for a host without a GPU",
    )
    unloaded = check(_host(gpus=parse_gpu_inventory(_output("GpuDevices", "driver_not_loaded"))))
    assert unloaded.problems[0].startswith("AMD GPU 0000:03:00.0 found but /dev/kfd is missing")


def test_gpu_not_required_skips_the_gpu_check():
    verdict = check(_host(gpu_required=False, gpus=None))
    assert verdict.fit and "no GPU required" in verdict.summary


def test_disk_need_shrinks_to_the_venv_once_rocm_is_installed():
    assert [(n.path, n.gb) for n in disk_needs(50, True, "/v")] == [("/opt", 30), ("/v", 20)]
    assert [(n.path, n.gb) for n in disk_needs(50, False, "/v")] == [("/v", 20)]
    assert [(n.path, n.gb) for n in disk_needs(5, True, "/v")] == [("/opt", 0), ("/v", 5)]


def test_too_little_disk_on_one_filesystem_names_it_and_the_fix():
    free = (FreeSpace("/opt", "/", 40 * GB), FreeSpace("/opt/rocm-fleet/venv", "/", 40 * GB))
    assert check(_host(free=free)).problems == (
        "only 40.0 GB free on /, which will hold ROCm (/opt) and the venv (/opt/rocm-fleet/venv); 50 GB needed: free "
        "space there, or lower min_free_disk_gb",
    )
    # Provisioned: ROCm is there, so only the venv's share is needed — the same host passes.
    assert check(_host(free=free, rocm_pending=False, needs=disk_needs(50, False, "/opt/rocm-fleet/venv"))).fit


def test_separate_filesystems_each_need_their_share():
    free = parse_free_space(_output("FreeSpaceFor", "separate_opt"))  # 90.8 GB on /opt, 400.7 GB on /home
    # 120 GB in all: ROCm's 100 must fit on /opt alone, the venv's 20 on /home.
    assert check(_host(free=free, needs=disk_needs(120, True, "/home/maria/venv"))).problems == (
        "only 90.8 GB free on /opt, which will hold ROCm (/opt); 100 GB needed: free space there, or lower "
        "min_free_disk_gb",
    )
    # 110 GB in all would not fit on one filesystem of 90.8 GB, but split over two it does.
    assert check(_host(free=free, needs=disk_needs(110, True, "/home/maria/venv"))).fit


def test_missing_accounts():
    verdict = check(_host(existing_users=frozenset({"root"})))
    assert verdict.problems == (
        "user(s) maria do not exist (workstation_users / venv_owner): create them, or fix the inventory",
    )


def test_every_problem_is_reported_at_once():
    verdict = check(
        _host(
            gpus=parse_gpu_inventory([]),
            existing_users=frozenset(),
            free=(FreeSpace("/opt", "/", 1 * GB), FreeSpace("/opt/rocm-fleet/venv", "/", 1 * GB)),
        )
    )
    assert len(verdict.problems) == 3


# --- the kernel side and integrated GPUs (issue 11) ------------------------------------------------------------------


def _kernel_case(name):
    from roles.debian import facts as debian_facts
    from tests.support.operation_cases import process_fact

    path = Path(__file__).parents[1] / "debian" / "facts" / "KernelDriver" / f"{name}.json"
    return process_fact(debian_facts.KernelDriver, json.loads(path.read_text())["output"])


def test_a_blacklisted_amdgpu_stops_a_gpu_host_with_the_file_and_the_fix():
    facts = _host(kernels=_kernel_case("debian12_blacklisted"))
    verdict = check(facts)
    assert not verdict.fit
    assert (
        "amdgpu is kept from loading by 'blacklist amdgpu' in /etc/modprobe.d/blacklist-gpu.conf:3: remove it, "
        "then update-initramfs -u and reboot (AMD's install FAQ)"
    ) in verdict.problems
    assert check(replace(facts, gpu_required=False, gpus=None)).fit  # no GPU required: not a stop


def test_a_pending_reboot_into_a_kernel_without_amdgpu_is_a_warning_not_a_stop():
    verdict = check(
        _host(
            kernels=_kernel_case("ubuntu_noble_upgrade_without_modules_extra"),
            gpus=parse_gpu_inventory(_output("GpuDevices", "instinct_mi300x")),
        )
    )
    assert verdict.fit
    assert verdict.warnings == (
        "reboot pending: the next boot runs 6.8.0-51-generic, which has no amdgpu.ko — the GPU is gone after that "
        "reboot: apt-get install linux-modules-extra-6.8.0-51-generic first (the ROCm stage does where apt has it)",
    )


def test_an_apus_igpu_beside_a_discrete_gpu_is_named_with_amds_advice():
    """The recorded Ryzen desktop (facts/GpuDevices/ryzen_rx7900xt.json): RX 7900 XT and the Raphael iGPU."""
    gpus = parse_gpu_inventory(_output("GpuDevices", "ryzen_rx7900xt"))
    assert [d.slot for d in gpus.integrated] == ["0000:0e:00.0"] and [d.slot for d in gpus.discrete] == ["0000:03:00.0"]
    verdict = check(_host(gpus=gpus))
    assert verdict.fit and verdict.warnings == (
        "integrated GPU 0000:0e:00.0 Raphael (gfx1036) beside the discrete GPU(s) 0000:03:00.0 (0x744c): the ROCm "
        "runtime may crash with the iGPU enumerated, even with HIP_VISIBLE_DEVICES set (AMD's prerequisites) — "
        "disable the integrated GPU in the BIOS; until then the verification runs NF4 on the discrete GPU(s) only and "
        "names the HIP_VISIBLE_DEVICES value that hides the iGPU",
    )
