"""A hostile workstation against the verification stage and the apt hook, on a real host: a local Debian 12
workstation (localfleet) over SSH, logged in as an admin with sudo, with the real torch 2.13.0 CPU wheel (the
STAND-IN for the unreachable ROCm wheel) and bitsandbytes 0.50.1 in the venv the venv stage made for the session
(tests/support/venv_image.py; tasks/venv.py runs here and finds it in place) and the apt hook installed by its stage.

- A verifier whose output lies (a STAND-IN: a root-owned /usr/local/bin/python3 that runs the real verifier and
  rewrites its verdict, as a damaged or tampered verifier would print it): tasks/verify.py passed such a host before;
  now it fails it with one line saying what is wrong with the report.
- A FIFO, a device node, a symlink to /dev/zero or a sparse ELF claiming 64 GiB at bitsandbytes' library: the FIFO
  hung tasks/verify.py and made every dpkg run wait for the hook's limit. Now tasks/verify.py finishes and fails the
  host with one line naming the file, and a real `apt-get install` shows the finding in apt's output — and nothing
  ever opens the FIFO to read it (the test would be its writer: tests/support/hostile_files.py).

The tests run in order on one host.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support.debs import build_deb
from tests.support.fleet_deploy import deploy, host_lines, summary_finding, summary_row
from tests.support.hostile_files import fifo_readers, plant
from tests.verify.ld.test_elf import _sparse
from verify.commands.apt_hook import PREFIX

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a local fleet (containers, mounts, sshd)"),
]

BNB_LIBRARY = "/opt/rocm-fleet/venv/lib/python3.11/site-packages/bitsandbytes/libbitsandbytes_rocm72.so"
RERUN = (
    "run tasks/verify.py again from this checkout (it uploads this checkout's verifier); if it happens again, "
    "the verifier on the host is damaged or not this checkout's"
)
LYING_PYTHON = """#!/bin/sh
# STAND-IN for a verifier whose output lies: the real one runs, then its report is rewritten.
/usr/bin/python3 "$@" > /tmp/verifier.out
{edit} /tmp/verifier.out
exit {status}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, venv_image):
    from localfleet.fleet import Fleet

    reports = tmp_path_factory.mktemp("reports")
    with Fleet.up(n=1, login="admin", data={"reports_dir": str(reports)}) as up:
        host = up.host("ws1")
        venv_image.lend(host)
        for task in ("tasks/venv.py", "tasks/apt_hook.py"):
            run = deploy(up.inventory, task)
            assert run.returncode == 0, run.explain()
        deb = build_deb(
            tmp_path_factory.mktemp("debs"), {"Package": "rocm-fleet-test-ok", "Version": "1.0", "Architecture": "all"}
        )
        (host.root / "tmp/ok.deb").write_bytes(deb.read_bytes())
        library = host.root / BNB_LIBRARY.lstrip("/")
        yield up, host, reports, library, library.read_bytes()


def verify(up, host) -> tuple[object, list[str]]:
    run = deploy(up.inventory, "tasks/verify.py")
    return run, host_lines(run.log, "ws1")


def apt_install(host):
    """A real dpkg run as the admin runs it (over SSH, with sudo): the apt hook runs after it."""
    return host.ssh(
        [
            "sudo",
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "-q",
            "-y",
            "install",
            "--reinstall",
            "/tmp/ok.deb",
        ],
        check=False,
    )


@pytest.mark.parametrize(
    "edit, status, words",
    [
        (
            'sed \'s/^ "verdict": "fail",$/ "verdict": "pass",/\'',
            0,
            "the report's verdict 'pass' is not what its checks give ('fail': check linkage.static is fail)",
        ),
        (
            'sed \'/^ "verdict": "fail",$/d\'',
            1,
            "the report does not match verify/report/report_schema.json (the document: 'verdict' is missing)",
        ),
    ],
    ids=["pass with failing checks", "no verdict, exit 1"],
)
def test_a_report_that_does_not_prove_a_pass_fails_the_host_with_one_line(fleet, edit, status, words):
    up, host, reports, _, _ = fleet
    wrapper = host.root / "usr/local/bin/python3"
    wrapper.write_text(LYING_PYTHON.format(edit=edit, status=status))
    wrapper.chmod(0o755)
    try:
        run, lines = verify(up, host)
    finally:
        wrapper.unlink()
    assert run.returncode == 1, run.explain()
    failed = [line for line in lines if line.startswith("ws1: verification ")]
    assert failed == [f"ws1: verification not proven — {words} — {RERUN}"], run.explain()
    assert "verification pass" not in run.log and "Traceback" not in run.log
    summary = (reports / "summary.md").read_text()
    assert summary_row(summary, "ws1").startswith("| ws1 | **NOT VERIFIED** | — |")
    assert summary_finding(summary, "ws1").startswith("**NOT VERIFIED** verification not proven — ")


@pytest.mark.parametrize(
    "kind, words",
    [
        ("fifo", "is a FIFO (a named pipe: opening it would block), not a regular file"),
        ("chardev", "is a character device, not a regular file"),
        ("symlink to /dev/zero", "is a character device, not a regular file"),
        ("sparse", "PT_DYNAMIC at offset 0x"),
    ],
)
def test_a_hostile_library_fails_the_host_with_one_line_and_is_a_finding_in_apts_output(fleet, kind, words):
    up, host, reports, library, original = fleet
    if kind == "sparse":
        _sparse(original, library, 2, 1 << 36)
    else:
        plant(library, kind)
    try:
        with fifo_readers(library) as opened:
            run, lines = verify(up, host)
            done = apt_install(host)
    finally:
        library.unlink()
        library.write_bytes(original)
        apt_install(host)  # the hook's next baseline: the host as it was
    assert opened.count == 0, "something opened the FIFO to read it"

    assert run.returncode == 1, run.explain()
    failed = [line for line in lines if line.startswith("ws1: verification ")]
    assert len(failed) == 1 and failed[0].startswith(f"ws1: verification failed — linkage.static: {BNB_LIBRARY}: "), (
        run.explain()
    )
    assert words in failed[0] and "Traceback" not in run.log, failed
    report = json.loads((reports / "ws1.json").read_text())
    runtime = next(c for c in report["checks"] if c["id"] == "runtime.torch")
    if kind != "sparse":  # a sparse file is a regular file: the probe runs and bitsandbytes' own load fails
        assert runtime["reason"].startswith(f"runtime probe not run: {BNB_LIBRARY}: not a regular file"), runtime

    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    hook = [line for line in output.splitlines() if line.startswith(PREFIX)]
    assert any(
        line.startswith(f"{PREFIX} now FAIL: linkage.static: {BNB_LIBRARY}: ") and words in line for line in hook
    ), hook


def test_with_the_library_restored_the_host_is_back_where_it_was(fleet):
    """(The library really was restored between the cases above: the host fails only on the missing system ROCm.)"""
    up, host, _, library, original = fleet
    assert library.read_bytes() == original
    run, lines = verify(up, host)
    assert run.returncode == 1
    assert any(line.startswith("ws1: verification failed — linkage.static: libhipblas.so.3") for line in lines), lines
