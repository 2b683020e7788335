"""`verify apt-hook`: what apt's output gets after a dpkg run, and that the hook never fails apt.

The hook runs as apt runs it: this machine's bare /usr/bin/python3 (no pyelftools, no pyinfra) with `-I -S` on the
launcher of this checkout's verifier, installed as on a host (tests/support/installed_verifier.py: the host's own
install script, roles/verifier.py). It checks stand-in workstation images (`--root`,
tests/support/drift_images.py: gcc-built STAND-INS for the torch ROCm wheel and ROCm, real Debian dpkg data) and keeps
its results in a scratch --state-dir.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.drift_images import Workstation
from tests.support.installed_verifier import install, version

REPO = Path(__file__).resolve().parents[3]
PYTHON = "/usr/bin/python3"
PREFIX = "rocm-fleet apt hook:"
VENV = "/opt/rocm-fleet/venv"

pytestmark = [
    pytest.mark.skipif(not Path(PYTHON).exists(), reason="needs the system's python3"),
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the installed verifier is root's only"),
]


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The installed verifier (its directory: launcher.py, the version, current), as the deploy installs it."""
    return install(tmp_path_factory.mktemp("hook") / "verifier")


def entry(copy: Path) -> list[str]:
    return [str(copy / "launcher.py"), "apt-hook"]


def hook(
    copy: Path, root: Path, state: Path, *extra: str, python: str = PYTHON, **kwargs
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            python,
            "-I",
            "-S",
            *entry(copy),
            "--venv",
            VENV,
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--root",
            str(root),
            "--state-dir",
            str(state),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        **kwargs,
    )


def lines(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return done.stdout.splitlines()


@pytest.fixture
def workstation(tmp_path) -> Workstation:
    return Workstation.provisioned(tmp_path / "ws")


def test_a_dpkg_run_that_makes_things_worse_warns_then_clearing_it_says_so(copy, workstation, tmp_path):
    state = tmp_path / "state"
    first = lines(hook(copy, workstation.root, state))
    assert len(first) == 1 and first[0].startswith(
        f"{PREFIX} baseline recorded for {VENV}: WARN — passed with warnings — linkage.static: two copies of "
        "libamdhip64"
    )
    assert lines(hook(copy, workstation.root, state)) == []  # nothing changed: apt's output stays quiet
    [unchanged] = lines(hook(copy, workstation.root, state, "--verbose"))
    assert unchanged.startswith(f"{PREFIX} no change (WARN: passed with warnings")

    workstation.distro_rocm_smi()  # what `apt-get install slurm-wlm-rsmi-plugin` brings (real Debian 12 dpkg data)
    warning = lines(hook(copy, workstation.root, state))
    assert warning[0] == f"{PREFIX} WARNING: this dpkg run made the ROCm setup of {VENV} worse (check now FAIL):"
    assert warning[1:3] == [
        f"{PREFIX}   worse: librocm_smi64.so.1 now resolves to /usr/lib/x86_64-linux-gnu/librocm_smi64.so.1 from "
        "librocm-smi64-1 5.2.3-2 (distro) instead of /opt/rocm-7.2.4/lib",
        f"{PREFIX}   worse: new stray package: libamd-comgr2 5.2.3-2 (pulled in by librocsparse0)",
    ]
    assert (
        f"{PREFIX}   worse: new stray package: librocm-smi64-1 5.2.3-2 (pulled in by slurm-wlm-rsmi-plugin, "
        "slurm-wlm-rsmi-plugin-dev; ships librocm_smi64.so.1, which a ROCm 7.2 consumer could bind to)"
    ) in warning
    assert len(warning) == 10
    assert warning[-1].startswith(f"{PREFIX} now FAIL: linkage.static: librocm_smi64.so.1 resolves to /usr/lib/")
    assert warning[-1].endswith(f"details in {state}/last.json; re-verify with: pyinfra INVENTORY tasks/verify.py")
    kept = json.loads((state / "last.json").read_text())
    assert kept["report"]["verdict"] == "fail" and len(kept["drift"]["changes"]) == 8
    assert json.loads((state / "last-pass.json").read_text())["report"]["verdict"] == "warn"

    workstation.restore_rocm_smi()  # `apt-get purge` it again
    [cleared] = lines(hook(copy, workstation.root, state))
    assert cleared.startswith(
        f"{PREFIX} cleared by this dpkg run: librocm_smi64.so.1 now resolves to "
        "/opt/rocm-7.2.4/lib/librocm_smi64.so.1 instead of /usr/lib/x86_64-linux-gnu from "
        "librocm-smi64-1 5.2.3-2 (distro); stray package gone: libamd-comgr2 5.2.3-2; "
    )
    assert cleared.endswith("; stray package gone: librocsparse0 5.3.0+dfsg-2 (check now WARN)")


def test_the_hook_imports_neither_torch_nor_bitsandbytes(copy, workstation, tmp_path):
    done = hook(copy, workstation.root, tmp_path / "state", python=PYTHON)
    imported = subprocess.run(
        [
            PYTHON,
            "-I",
            "-S",
            "-X",
            "importtime",
            *entry(copy),
            "--venv",
            VENV,
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--root",
            str(workstation.root),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = [
        line.rsplit("|", 1)[-1].strip() for line in imported.stderr.splitlines() if line.startswith("import time:")
    ]
    assert "verify.checks.linkage" in modules and "elftools.elf.structs" in modules, imported.stderr[-2000:]
    assert not [m for m in modules if m.split(".")[0] in ("torch", "bitsandbytes", "numpy")]
    assert done.returncode == imported.returncode == 0


@pytest.mark.parametrize(
    "case, arguments, expected",
    [
        (
            "venv gone",
            ["--venv", "/opt/gone"],
            f"{PREFIX} no check — /opt/gone: not a venv (no pyvenv.cfg) — pass the venv's directory, e.g. "
            "/opt/rocm-fleet/venv",
        ),
        (
            "bad hook line",
            ["--expect-rocm", "7.2"],
            f"{PREFIX} not run — --expect-rocm '7.2' is not a release like 7.2.4 (fix the hook line: run "
            "tasks/apt_hook.py again)",
        ),
        (
            "unknown release",
            ["--expect-rocm", "7.2.9"],
            f"{PREFIX} not run — --expect-rocm: ROCm 7.2.9 is not a release this checkout knows (known: 7.2.4; a "
            "release is added as verify/stack/releases/X.Y.Z.json) (run tasks/apt_hook.py again)",
        ),
        (
            "unknown argument",
            ["--bogus"],
            f"{PREFIX} not run — unrecognized arguments: --bogus (the hook line in /etc/apt/apt.conf.d is wrong: run "
            "tasks/apt_hook.py again)",
        ),
        (
            "time limit",
            ["--time-limit", "0.001"],
            f"{PREFIX} no check this time — it took longer than its time limit; apt is not affected — "
            "re-verify with: pyinfra INVENTORY tasks/verify.py",
        ),
    ],
)
def test_its_own_failures_print_one_line_and_exit_0(copy, workstation, tmp_path, case, arguments, expected):
    assert lines(hook(copy, workstation.root, tmp_path / "state", *arguments)) == [expected]
    assert not (tmp_path / "state").exists()  # nothing recorded


def test_the_time_limit_holds_even_if_apt_started_the_hook_with_sigalrm_blocked(copy, workstation, tmp_path):
    blocked = hook(
        copy,
        workstation.root,
        tmp_path / "state",
        "--time-limit",
        "0.001",
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}),
    )
    assert lines(blocked) == [
        f"{PREFIX} no check this time — it took longer than its time limit; apt is not affected "
        "— re-verify with: pyinfra INVENTORY tasks/verify.py"
    ]


def test_a_damaged_verifier_is_refused_by_its_launcher_in_one_line_and_exit_0(workstation, tmp_path):
    """The launcher holds the installed version to its rule first (tests/roles/test_verifier.py has every way it can
    break): apt's output gets one line, and apt's exit status is untouched."""
    broken = install(tmp_path / "verifier")
    (broken / version() / "verify" / "checks" / "host.py").unlink()
    done = hook(broken, workstation.root, tmp_path / "state")
    assert (done.returncode, done.stdout) == (0, "")
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{PREFIX} not run - ") and "holds other files than its MANIFEST lists" in line


def test_an_unreadable_state_file_is_named_and_replaced(copy, workstation, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "last.json").write_text("{half a file")
    said = lines(hook(copy, workstation.root, state))
    assert said[0].startswith(f"{PREFIX} {state}/last.json is not JSON (") and said[0].endswith(
        "): this run's result replaces it"
    )
    assert said[1].startswith(f"{PREFIX} baseline recorded for {VENV}: WARN")
    assert json.loads((state / "last.json").read_text())["kind"] == "rocm-fleet.apt-hook-result"


def test_a_state_file_it_cannot_compare_with_is_named_and_replaced(copy, workstation, tmp_path):
    """A result that reads as one but is not shaped like this verifier's (another version, hand-edited): without
    replacing it, every later dpkg run would end in 'no check this time'."""
    state = tmp_path / "state"
    lines(hook(copy, workstation.root, state))
    kept = json.loads((state / "last.json").read_text())
    linkage = next(c for c in kept["report"]["checks"] if c["id"] == "linkage.static")
    del linkage["evidence"]["rocm_objects"][0]["requested_as"]
    (state / "last.json").write_text(json.dumps(kept))
    said = lines(hook(copy, workstation.root, state))
    assert said[0] == (
        f"{PREFIX} {state}/last.json is not shaped like a result of this verifier (ReportError: "
        "linkage.static's evidence has no 'requested_as'): this run's result replaces it"
    )
    assert said[1].startswith(f"{PREFIX} baseline recorded for {VENV}: WARN")
    assert lines(hook(copy, workstation.root, state)) == []  # compared with the replacement from now on


def test_a_state_directory_it_cannot_write_is_one_line_and_the_check_still_reports(copy, workstation, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    said = lines(hook(copy, workstation.root, blocked / "state"))
    assert said[0] == (
        f"{PREFIX} could not keep this result in {blocked}/state (Not a directory): the next run "
        "compares with an older one"
    )
    assert said[1].startswith(f"{PREFIX} baseline recorded for {VENV}: WARN")


def test_changed_settings_start_a_new_baseline(copy, workstation, tmp_path):
    state = tmp_path / "state"
    lines(hook(copy, workstation.root, state))
    said = lines(hook(copy, workstation.root, state, "--expect-bitsandbytes", "0.49.0"))
    assert said[0] == (
        f"{PREFIX} the hook now checks {VENV} under {workstation.root} for ROCm 7.2.4, bitsandbytes "
        f"0.49.0 (it checked {VENV} under {workstation.root} for ROCm 7.2.4, bitsandbytes 0.50.1): this "
        "result is the new baseline"
    )
    assert said[1].startswith(f"{PREFIX} baseline recorded for {VENV}: FAIL — versions.bitsandbytes:")


def test_with_metrics_dir_each_run_rewrites_the_metrics_from_every_kept_result(copy, workstation, tmp_path):
    """The hook keeps its result in <root>/apt-hook and rewrites rocm_fleet.prom from everything kept in <root>: its own
    result and the verification's report beside it."""
    root, metrics = tmp_path / "rocm-fleet", tmp_path / "node-exporter"
    metrics.mkdir()
    root.mkdir()
    report = json.loads(json.dumps(_verification_report()))
    (root / "last-verify.json").write_text(json.dumps(report))
    assert lines(hook(copy, workstation.root, root / "apt-hook", "--metrics-dir", str(metrics)))[0].startswith(
        f"{PREFIX} baseline recorded"
    )
    prom = (metrics / "rocm_fleet.prom").read_text().splitlines()
    assert 'rocm_fleet_verdict{source="apt_hook",verdict="warn"} 1' in prom
    assert 'rocm_fleet_verdict{source="verification",verdict="pass"} 1' in prom
    workstation.distro_rocm_smi()  # a dpkg run that brings a stray: the file follows
    lines(hook(copy, workstation.root, root / "apt-hook", "--metrics-dir", str(metrics)))
    prom = (metrics / "rocm_fleet.prom").read_text().splitlines()
    assert 'rocm_fleet_verdict{source="apt_hook",verdict="fail"} 1' in prom
    assert 'rocm_fleet_check_status{source="apt_hook",check="linkage.static",status="fail"} 1' in prom
    assert 'rocm_fleet_stray_packages{source="apt_hook"} 7' in prom  # counted after this dpkg run


def test_metrics_it_cannot_write_are_one_line_and_the_check_still_reports(copy, workstation, tmp_path):
    blocked = tmp_path / "metrics"
    blocked.mkdir()
    (blocked / "rocm_fleet.prom").mkdir()  # the name is taken by a directory: the rename fails
    said = lines(hook(copy, workstation.root, tmp_path / "state", "--metrics-dir", str(blocked)))
    assert said[0].startswith(f"{PREFIX} could not write {blocked}/rocm_fleet.prom (IsADirectoryError: ")
    assert said[0].endswith("; apt is not affected")
    assert said[1].startswith(f"{PREFIX} baseline recorded for {VENV}: WARN")


def _verification_report() -> dict:
    from tests.support.report_samples import sample_report

    return sample_report()


def test_the_cli_subcommand_is_the_same_hook(workstation, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify",
            "apt-hook",
            "--venv",
            VENV,
            "--expect-rocm",
            "7.2.4",
            "--expect-bitsandbytes",
            "0.50.1",
            "--root",
            str(workstation.root),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith(f"{PREFIX} baseline recorded for {VENV}: WARN")


def test_the_hooks_spelled_out_defaults_agree_with_the_verifiers():
    """apt_hook.py imports nothing from the verifier outside its guard, and the launcher (which runs it) nothing of
    it, so they spell these out: they must not drift."""
    import argparse

    from verify.commands.apt_hook import DEFAULT_STATE_DIR, PREFIX, QUESTION, add_arguments
    from verify.commands.boot_check import PREFIX as BOOT_PREFIX
    from verify.commands.check import register as register_check
    from verify.launcher import PREFIXES
    from verify.question import Question
    from verify.report.hook_state import DEFAULT_DIR
    from verify.report.kept_files import KEPT, STATE_ROOT

    assert DEFAULT_STATE_DIR == DEFAULT_DIR
    assert PREFIXES == {"apt-hook": PREFIX, "boot-check": BOOT_PREFIX}
    # The hook's metrics are made from the results kept beside its state directory: the status task reads the same.
    assert f"{STATE_ROOT}/{KEPT['apt_hook']}" == f"{DEFAULT_DIR}/last.json"
    hook_parser = argparse.ArgumentParser()
    add_arguments(hook_parser)
    check_parser = argparse.ArgumentParser().add_subparsers()
    register_check(check_parser)
    asked = ["--venv", VENV, "--expect-rocm", "7.2.4", "--expect-bitsandbytes", "0.50.1"]
    hook_args = hook_parser.parse_args(asked)
    check_args = check_parser.choices["check"].parse_args(asked)
    assert Question.from_args(hook_args, QUESTION) == Question.from_args(check_args, QUESTION)
    assert hook_args.state_dir == Path(DEFAULT_DIR)


BNB_LIBRARY = f"{VENV}/lib/python3.11/site-packages/bitsandbytes/libbitsandbytes_rocm72.so"


@pytest.mark.parametrize(
    "kind, words",
    [
        ("fifo", "is a FIFO (a named pipe: opening it would block), not a regular file"),
        ("chardev", "is a character device, not a regular file"),
        (
            "sparse",
            "claims 1099511627776 bytes, more than any real one (limit 1048576 bytes): corrupt or hostile, not read",
        ),
    ],
)
def test_a_hostile_library_is_a_finding_in_apts_output_not_a_hang(copy, workstation, tmp_path, kind, words):
    """Issue 9 findings 5 and 6, the hook's side: after every dpkg run it read bitsandbytes' library as root; a FIFO
    there made every dpkg run wait for the hook's 60 s limit (and then say nothing useful), a sparse ELF claiming a
    terabyte was a MemoryError. Now the check itself reports the file, in apt's output, and never opens the FIFO."""
    import os

    from tests.support.hostile_files import fifo_readers, plant
    from tests.verify.ld.test_elf import _sparse

    if kind == "chardev" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    state = tmp_path / "state"
    lines(hook(copy, workstation.root, state))  # the baseline: WARN
    target = workstation.root / BNB_LIBRARY.lstrip("/")
    if kind == "sparse":
        _sparse(target.read_bytes(), target, 2, 1 << 40)
    else:
        plant(target, kind)
    with fifo_readers(target) as opened:
        warning = lines(hook(copy, workstation.root, state))
    assert opened.count == 0, "the hook opened the FIFO to read it"
    assert warning[0] == f"{PREFIX} WARNING: this dpkg run made the ROCm setup of {VENV} worse (check now FAIL):"
    assert warning[-1].startswith(f"{PREFIX} now FAIL: linkage.static: {BNB_LIBRARY}: "), warning[-1]
    assert words in warning[-1] and "reinstall what ships libbitsandbytes_rocm72.so" in warning[-1], warning[-1]
    assert json.loads((state / "last-pass.json").read_text())["report"]["verdict"] == "warn"


@pytest.mark.parametrize("value", ["nan", "inf", "1e300", "-1", "never"])
def test_a_time_limit_that_is_not_a_number_of_seconds_is_one_line_and_exit_0(copy, workstation, tmp_path, value):
    """Issue 9 finding 10: `--time-limit nan` set no limit at all, `inf` and `1e300` ended in an OverflowError."""
    assert lines(hook(copy, workstation.root, tmp_path / "state", f"--time-limit={value}")) == [
        f"{PREFIX} not run — argument --time-limit: {value!r} is not a number of seconds from 0 up to 3600; 0 means "
        "no limit (the hook line in /etc/apt/apt.conf.d is wrong: run tasks/apt_hook.py again)"
    ]
    assert not (tmp_path / "state").exists()


# --- kernels (issue 11) ----------------------------------------------------------------------------------------------


def _install_kernel(root: Path, release: str, amdgpu: bool) -> None:
    """What a kernel package leaves on disk, enough for the hook: the image and its modules directory (STAND-IN
    files)."""
    (root / "boot").mkdir(exist_ok=True)
    (root / "boot" / f"vmlinuz-{release}").write_bytes(b"stand-in kernel image")
    modules = root / "lib/modules" / release / "kernel/drivers/gpu/drm/amd/amdgpu"
    modules.mkdir(parents=True)
    if amdgpu:
        (modules / "amdgpu.ko.zst").write_bytes(b"stand-in module")


def test_a_dpkg_run_that_installs_a_kernel_without_amdgpu_warns_in_apts_output(copy, workstation, tmp_path):
    state = tmp_path / "state"
    _install_kernel(workstation.root, "6.8.0-49-generic", amdgpu=True)
    lines(hook(copy, workstation.root, state))  # the baseline
    _install_kernel(workstation.root, "6.8.0-51-generic", amdgpu=True)
    assert lines(hook(copy, workstation.root, state)) == [
        f"{PREFIX} changed by this dpkg run: kernel 6.8.0-51-generic was installed (amdgpu.ko present) (check now WARN)"
    ]
    _install_kernel(workstation.root, "6.8.0-52-generic", amdgpu=False)
    warning = lines(hook(copy, workstation.root, state))
    assert warning[:2] == [
        f"{PREFIX} WARNING: this dpkg run made the ROCm setup of {VENV} worse (check now WARN):",
        f"{PREFIX}   worse: kernel 6.8.0-52-generic was installed without amdgpu.ko: it boots next — after the next "
        "reboot the GPU is gone",
    ]


def test_a_pending_reboot_is_one_line_naming_the_next_kernel():
    """The running system cannot be an image (--root has no running kernel): the line from a report's kernel facts."""
    from dataclasses import replace

    from tests.support.report_samples import sample
    from verify.commands.apt_hook import reboot_lines
    from verify.report.report import KernelFacts

    report = sample(static_only=True)
    pending = KernelFacts(
        "6.8.0-49-generic",
        "6.8.0-51-generic",
        True,
        True,
        True,
        False,
        ("6.8.0-49-generic", "6.8.0-51-generic"),
        ("6.8.0-51-generic",),
    )
    assert reboot_lines(replace(report, facts=replace(report.facts, kernel=pending))) == [
        f"{PREFIX} reboot pending: the next boot runs 6.8.0-51-generic (NO amdgpu.ko: the GPU is gone after that "
        "reboot; 6.8.0-49-generic runs now)"
    ]
    settled = replace(pending, next_boot="6.8.0-49-generic", reboot_pending=False)
    assert reboot_lines(replace(report, facts=replace(report.facts, kernel=settled))) == []
