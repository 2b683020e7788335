"""verify/checks/runtime.py (and the probe it runs): the runtime checks against the real torch 2.13.0 (CPU) and
bitsandbytes 0.50.1 wheel, run through `verify check` as on a host.

What is mocked, and only there: a torch ROCm build with a GPU (tests/support/standins/torch_reports_hip); the broken
quantizer is a deliberate fault (standins/broken_nf4_quantizer). The judging functions are also tested on probe
data, for the GPU cases this machine cannot produce.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.verify_runs import cached_check, check_by_id, torch_cpu_venv
from verify.checks.nf4 import BOUNDS, check_nf4
from verify.checks.runtime import (
    MOCK_CLASS,
    NATIVE_CLASS,
    ProbeRun,
    RuntimeExpectations,
    check_bnb_library,
    check_devices,
    judge_runtime,
)
from verify.report.report import FAIL, PASS, WARN
from verify.stack.rocm_release import rocm_release

WANT_GPU = RuntimeExpectations.of(rocm_release("7.2.4"), "auto", gpu_required=True)


@pytest.mark.slow
def test_real_nf4_smoke_on_cpu_passes_within_bitsandbytes_bounds():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    assert report is not None, done.stderr
    nf4 = check_by_id(report, "nf4.cpu")
    assert nf4["status"] == PASS, nf4
    evidence = nf4["evidence"]
    for bound in BOUNDS:
        value = evidence[bound.key]
        assert bound.low < value < bound.high, (bound.key, value)
    assert evidence["dtype"] == "float32" and evidence["shape"] == [1024, 1024] and evidence["blocksize"] == 64
    assert set(evidence["timings_ms"]) == {"quantize", "dequantize", "matmul_4bit", "linear4bit_forward"}
    # 4-bit weights take a quarter of fp16's bytes.
    assert evidence["linear4bit_weight_bytes"] * 4 == evidence["float16_weight_bytes"]
    assert "not a GPU pass" in nf4["reason"]
    assert evidence["gpu_pass"] is False
    # --device cpu says plainly that no GPU was tested.
    devices = check_by_id(report, "runtime.devices")
    assert devices["status"] == WARN and "not a GPU pass" in devices["reason"]
    assert report["facts"]["device_mode"] == "cpu"


@pytest.mark.slow
def test_nf4_check_fails_when_the_quantizer_does_nothing():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu", standin="broken_nf4_quantizer")
    assert report is not None, done.stderr
    nf4 = check_by_id(report, "nf4.cpu")
    assert nf4["status"] == FAIL, nf4
    assert nf4["evidence"]["roundtrip_mean_abs_error"] == 0.0
    assert "the quantizer did nothing" in nf4["reason"]
    assert done.returncode == 1


@pytest.mark.slow
def test_runtime_sees_the_real_bitsandbytes_native_library_on_the_cpu_venv():
    report, _ = cached_check(torch_cpu_venv(), "--device", "cpu")
    bnb = check_by_id(report, "runtime.bnb_library")
    # torch sees no GPU, so bitsandbytes (really) loads its CPU library: not the mock, but not the ROCm one either.
    assert bnb["evidence"]["library_class"] == "BNBNativeLibrary"
    assert bnb["evidence"]["library_file"].endswith("/bitsandbytes/libbitsandbytes_cpu.so")
    assert bnb["status"] == WARN and "libbitsandbytes_rocm72.so was not loaded" in bnb["reason"]
    torch = check_by_id(report, "runtime.torch")
    assert torch["status"] == FAIL and "not a ROCm build" in torch["reason"]


@pytest.mark.slow
def test_mock_library_fallback_is_detected_and_names_the_missing_dependency():
    """torch claims HIP 7.2 and a GPU (the mock); bitsandbytes really dlopens libbitsandbytes_rocm72.so, the real
    loader really fails on libhipblas.so.3, bitsandbytes really installs its mock — and the check says so."""
    report, done = cached_check(torch_cpu_venv(), standin="torch_reports_hip")
    assert report is not None, done.stderr
    bnb = check_by_id(report, "runtime.bnb_library")
    assert bnb["status"] == FAIL
    assert bnb["evidence"]["library_class"] == MOCK_CLASS
    assert bnb["evidence"]["load_error"].startswith("libhipblas.so.3: cannot open shared object file")
    assert "mock library" in bnb["reason"] and "libhipblas.so.3" in bnb["reason"]
    assert "install ROCm 7.2.4 (amdgpu-install -y --usecase=rocm --no-dkms)" in bnb["reason"]
    assert any("bitsandbytes library load error: libhipblas.so.3" in line for line in bnb["evidence"]["log"])
    # The static prediction names the same missing library, before anything was imported.
    linkage = check_by_id(report, "linkage.static")
    assert linkage["reason"].startswith(
        "libhipblas.so.3 (needed by libbitsandbytes_rocm72.so) not found via RUNPATH /opt/rocm/lib:/opt/rocm-7.2.4/lib"
    )
    devices = check_by_id(report, "runtime.devices")
    assert devices["status"] == PASS and "gfx1100" in devices["reason"]
    assert done.returncode == 1


# --- judging probe data: the GPU cases ------------------------------------------------------------------------------


def _probe(
    devices=(),
    library_class=NATIVE_CLASS,
    library_file="/v/bitsandbytes/libbitsandbytes_rocm72.so",
    load_error=None,
    env=None,
    nf4=(),
):
    return {
        "env": env or {},
        "errors": {},
        "torch": {
            "version": "2.13.0+rocm7.2",
            "hip": "7.2.53211",
            "cuda_available": bool(devices),
            "devices": list(devices),
        },
        "bitsandbytes": {"library_class": library_class, "library_file": library_file, "load_error": load_error},
        "nf4": list(nf4),
    }


GFX1100 = {"index": 0, "name": "AMD Radeon RX 7900 XT", "arch": "gfx1100", "total_memory": 20 * 2**30}
GFX1030 = {"index": 1, "name": "AMD Radeon RX 6800", "arch": "gfx1030", "total_memory": 16 * 2**30}


def test_devices_pass_with_a_covered_arch_and_warn_for_rdna2():
    assert check_devices(_probe([GFX1100]), WANT_GPU).status == PASS
    mixed = check_devices(_probe([GFX1100, GFX1030], env={"HIP_VISIBLE_DEVICES": "0,1"}), WANT_GPU)
    assert mixed.status == WARN
    assert "GPU 1 is gfx1030" in mixed.reason and "invalid device function" in mixed.reason
    assert mixed.evidence["visibility_env"] == {"HIP_VISIBLE_DEVICES": "0,1"}


def test_arch_with_target_features_is_matched_on_its_base_name():
    featured = dict(GFX1100, arch="gfx90a:sramecc+:xnack-")
    assert check_devices(_probe([featured]), WANT_GPU).status == PASS


def test_no_gpu_fails_when_required_and_warns_when_not():
    failed = check_devices(_probe([], env={"HIP_VISIBLE_DEVICES": ""}), WANT_GPU)
    assert failed.status == FAIL and "HIP_VISIBLE_DEVICES=''" in failed.reason
    relaxed = RuntimeExpectations.of(rocm_release("7.2.4"), "auto", gpu_required=False)
    assert check_devices(_probe([]), relaxed).status == WARN


def test_bnb_library_classes():
    assert check_bnb_library(_probe([GFX1100]), WANT_GPU).status == PASS
    other = check_bnb_library(_probe([GFX1100], library_file="/v/bitsandbytes/libbitsandbytes_rocm71.so"), WANT_GPU)
    assert other.status == FAIL and "libbitsandbytes_rocm71.so, not libbitsandbytes_rocm72.so" in other.reason
    cpu_lib = _probe([GFX1100], library_class="BNBNativeLibrary", library_file="/v/bitsandbytes/libbitsandbytes_cpu.so")
    assert check_bnb_library(cpu_lib, WANT_GPU).status == FAIL
    mock = _probe(
        [GFX1100],
        library_class=MOCK_CLASS,
        library_file=None,
        load_error="libhipblaslt.so.1: cannot open shared object file: No such file or directory",
    )
    result = check_bnb_library(mock, WANT_GPU)
    assert result.status == FAIL and "libhipblaslt.so.1" in result.reason and "amdgpu-install" in result.reason


def test_gpu_nf4_reason_carries_timings_and_memory():
    run = {
        "device": "cuda:0",
        "errors": {},
        "timings_ms": {"quantize": 1.5, "dequantize": 0.5},
        "roundtrip_mean_abs_error": 0.0729,
        "roundtrip_mean_rel_error": 0.204,
        "matmul_mean_abs_error": 0.073,
        "linear4bit_cosine": 0.996,
        "gpu_peak_memory_bytes": 3 * 2**20,
    }
    (result,) = check_nf4(_probe([GFX1100], nf4=[run]))
    assert result.id == "nf4.cuda0" and result.status == PASS
    assert "cuda:0 (gfx1100)" in result.reason and "3.0 MiB GPU memory" in result.reason
    assert "not a GPU pass" not in result.reason


def test_a_probe_that_died_is_one_failure_with_its_last_words():
    run = ProbeRun(
        None,
        -11,
        ("Fatal Python error: Segmentation fault",),
        "the probe produced no report (killed by signal 11; last line: Fatal Python error: Segmentation fault)",
    )
    (result,) = judge_runtime(run, WANT_GPU)
    assert result.status == FAIL and "signal 11" in result.reason


# --- integrated GPUs (issue 11) ---------------------------------------------------------------------------------------


def test_an_apus_integrated_gpu_beside_a_discrete_one_is_named_and_nf4_runs_on_the_discrete_one_only():
    """MOCK (standins/torch_reports_hip_with_igpu): torch sees an RX 7900 XT and the Raphael iGPU. The real probe
    marks the iGPU, runs NF4 on cuda:0 only (it fails there: no GPU exists here), and the check names both."""
    report, done = cached_check(torch_cpu_venv(), standin="torch_reports_hip_with_igpu")
    assert report is not None, done.stderr
    devices = check_by_id(report, "runtime.devices")
    assert devices["status"] == WARN
    assert devices["reason"] == (
        "GPU 1 (gfx1036, stand-in AMD Radeon Graphics (Raphael iGPU, no GPU here)) is an APU's integrated GPU beside "
        "GPU 0 (gfx1100, stand-in Radeon RX 7900 XT (no GPU here)): NF4 ran on GPU 0 only; the ROCm runtime may crash "
        "with the integrated GPU enumerated, even with HIP_VISIBLE_DEVICES set (AMD's prerequisites) — disable the "
        "integrated GPU in the BIOS, or at least set HIP_VISIBLE_DEVICES=0 for the users"
    )
    assert [run["device"] for run in report["facts"]["nf4"]] == ["cuda:0"]
    assert [(g["index"], g["integrated"], g["work"]) for g in report["facts"]["gpus"]] == [
        (0, False, True),
        (1, True, False),
    ]


def test_an_apu_alone_is_the_work_gpu():
    """Probe data of a Strix Halo workstation (no discrete GPU): its integrated GPU is the one to test, no warning."""
    probe = _probe(
        devices=[{"index": 0, "name": "AMD Radeon 8060S", "arch": "gfx1151", "integrated": True, "work": True}]
    )
    result = check_devices(probe, WANT_GPU)
    assert result.status == PASS and result.reason == "1 GPU(s): 0: gfx1151 (AMD Radeon 8060S)"


# --- who runs the probe (the venv's code is its owner's, never root's) ---------------------------------------------


def _owned_venv(directory, owner_uid: int, log):
    """A small real venv (no torch) owned by `owner_uid`, with a zz.pth that appends who started its python to
    `log`: what an ordinary account can drop into its own venv."""
    import subprocess

    venv = directory / "venv"
    # Debian's python3: this test's own interpreter may lie where other accounts cannot reach (pyenv under /root).
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "zz.pth").write_text(
        f"import os; f = open({str(log)!r}, 'a'); f.write('%d %s %s\\n' % (os.getuid(), os.environ.get('HOME'), "
        "os.environ.get('USER'))); f.close()\n"
    )
    log.touch()
    log.chmod(0o666)
    for path in [venv, *venv.rglob("*")]:
        os.lchown(path, owner_uid, owner_uid)
    return venv


@pytest.mark.root
def test_the_probe_runs_as_the_venvs_owner_with_the_owners_environment():
    """`verify check` ran the venv's python as root, so a .pth file its owner dropped into
    site-packages ran as uid 0. Run as root by hand (no --probe-user), the probe now runs as the venv's owner
    (here nobody), with nobody's HOME and USER; with --probe-user the named account; and the report says who."""
    import pwd

    from tests.support.venvs import root_only_dir
    from tests.support.verify_runs import run_check

    nobody = pwd.getpwnam("nobody")
    with root_only_dir() as directory:
        log = directory / "uids"
        venv = _owned_venv(directory, nobody.pw_uid, log)
        report, done = run_check(venv, "--device", "cpu")
        assert report is not None, done.stderr
        # Every start of the venv's python, and only those, appended a line: all of them nobody's.
        assert set(log.read_text().splitlines()) == {f"{nobody.pw_uid} {nobody.pw_dir} nobody"}
        assert report["facts"]["probe_account"] == {"user": "nobody", "uid": nobody.pw_uid, "groups": ["nogroup"]}
        report, done = run_check(venv, "--device", "cpu", "--probe-user", "nobody")
        assert report["facts"]["probe_account"]["user"] == "nobody"
        assert set(log.read_text().splitlines()) == {f"{nobody.pw_uid} {nobody.pw_dir} nobody"}


@pytest.mark.root
def test_root_never_runs_the_probe_in_a_venv_another_account_can_change():
    """--probe-user root (e.g. venv_owner still root in the inventory) on a venv with a file of another account:
    the probe is not run, and the report says why."""
    import pwd

    from tests.support.venvs import root_only_dir
    from tests.support.verify_runs import run_check

    with root_only_dir() as directory:
        log = directory / "uids"
        venv = _owned_venv(directory, 0, log)
        planted = next((venv / "lib").glob("python3*/site-packages")) / "zz.pth"
        os.chown(planted, pwd.getpwnam("nobody").pw_uid, -1)
        report, done = run_check(venv, "--device", "cpu", "--probe-user", "root")
        assert report is not None, done.stderr
        torch = check_by_id(report, "runtime.torch")
        assert torch["status"] == FAIL
        assert torch["reason"] == (
            f"runtime probe failed: not run as root: {planted} belongs to nobody, and code in "
            "the venv would run as root — pass --probe-user with the venv's owner (venv_owner), "
            "or rebuild the venv as root's"
        )
        assert log.read_text() == ""
        assert report["facts"]["probe_account"] is None  # nothing of the venv ran


def test_the_probes_output_is_read_bounded_and_what_it_leaves_running_is_stopped(tmp_path):
    """The probe is the venv owner's code: a child it leaves holding its stdout must not keep root's verifier waiting
    (with pipes, subprocess waits for their end), and whatever it prints, only the tail is read. A stand-in
    interpreter (a shell script) plays the probe."""
    import signal

    from verify.checks.runtime import PROBE_OUTPUT_LIMIT, run_probe

    pid_file = tmp_path / "child"
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        f"sleep 3600 & echo $! > {pid_file}\n"
        f"head -c {PROBE_OUTPUT_LIMIT * 2} /dev/zero | tr '\\0' x\necho\n"
        "echo '{\"torch\": null}'\n"
    )
    python.chmod(0o755)
    # A guard, not a budget: turns a hang (the old pipes) into a failure instead of a stuck suite.
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("run_probe waited for a child the probe left running"))
    signal.alarm(600)
    try:
        run = run_probe(python, "cpu", env={})
    finally:
        signal.alarm(0)
    assert run.data == {"torch": None} and run.returncode == 0, run
    child = int(pid_file.read_text())
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
