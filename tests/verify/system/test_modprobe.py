"""verify/system/modprobe.py: what keeps amdgpu from loading, from modprobe.d files and kernel command lines as real
systems have them (Ubuntu's GRUB default line; AMD's install FAQ for the blacklist)."""

from __future__ import annotations

import pytest

from verify.system.modprobe import blocks_in_cmdline, blocks_in_modprobe_conf, modprobe_files, read_modprobe_config

UBUNTU_CMDLINE = (
    "BOOT_IMAGE=/vmlinuz-6.8.0-51-generic root=UUID=0c1e5a0e-6f1a-4e2b-9d4e-2f7f1c9a3b11 ro quiet splash vt.handoff=7"
)
DEBIAN_CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=UUID=5b9a6c1e-1d2f-4e3a-8b7c-9d0e1f2a3b4c ro quiet"


@pytest.mark.parametrize(
    "cmdline, blocking",
    [
        (UBUNTU_CMDLINE, []),
        (DEBIAN_CMDLINE, []),
        (UBUNTU_CMDLINE + " modprobe.blacklist=nouveau,amdgpu", ["modprobe.blacklist=nouveau,amdgpu"]),
        (DEBIAN_CMDLINE + " module_blacklist=amdgpu", ["module_blacklist=amdgpu"]),
        (UBUNTU_CMDLINE + " nomodeset", ["nomodeset"]),
        (UBUNTU_CMDLINE + " amdgpu.modeset=0", ["amdgpu.modeset=0"]),
        (UBUNTU_CMDLINE + " amdgpu.modeset=1 amdgpu.ppfeaturemask=0xffffffff", []),
        (UBUNTU_CMDLINE + " modprobe.blacklist=radeon", []),
        (UBUNTU_CMDLINE + " initcall_blacklist=amdgpu_init", ["initcall_blacklist=amdgpu_init"]),
    ],
)
def test_kernel_command_lines(cmdline, blocking):
    assert [b.text for b in blocks_in_cmdline(cmdline)] == blocking


def test_modprobe_lines_that_block_and_those_that_do_not():
    text = """# AMD's FAQ: remove this line
blacklist amdgpu
blacklist radeon
options amdgpu ppfeaturemask=0xffffffff
install amdgpu /bin/false
install amdgpu /sbin/modprobe --ignore-install amdgpu $CMDLINE_OPTS && echo loaded
# blacklist amdgpu   (commented out: no block)
install \\
  amdgpu /bin/true
"""
    found = blocks_in_modprobe_conf(text, "/etc/modprobe.d/gpu.conf")
    assert [(b.where, b.text) for b in found] == [
        ("/etc/modprobe.d/gpu.conf:2", "blacklist amdgpu"),
        ("/etc/modprobe.d/gpu.conf:5", "install amdgpu /bin/false"),
        ("/etc/modprobe.d/gpu.conf:8", "install amdgpu /bin/true"),
    ]


def test_a_file_in_etc_hides_the_same_name_in_lib_and_only_conf_files_count(tmp_path):
    (tmp_path / "etc/modprobe.d").mkdir(parents=True)
    (tmp_path / "lib/modprobe.d").mkdir(parents=True)
    (tmp_path / "lib/modprobe.d/amd.conf").write_text("blacklist amdgpu\n")
    (tmp_path / "lib/modprobe.d/other.conf").write_text("blacklist amdgpu\n")
    (tmp_path / "etc/modprobe.d/amd.conf").write_text("# emptied by the admin\n")
    (tmp_path / "etc/modprobe.d/notes.txt").write_text("blacklist amdgpu\n")
    assert modprobe_files(str(tmp_path)) == ["/etc/modprobe.d/amd.conf", "/lib/modprobe.d/other.conf"]
    blocks, unreadable = read_modprobe_config(str(tmp_path))
    assert [b.describe() for b in blocks] == ["'blacklist amdgpu' in /lib/modprobe.d/other.conf:1"]
    assert unreadable == []


def test_a_fifo_in_modprobe_d_is_named_not_opened(tmp_path):
    import os

    (tmp_path / "etc/modprobe.d").mkdir(parents=True)
    os.mkfifo(tmp_path / "etc/modprobe.d/trap.conf")
    blocks, unreadable = read_modprobe_config(str(tmp_path))
    assert (
        blocks == []
        and len(unreadable) == 1
        and "a FIFO (a named pipe: opening it would block), not a regular file" in unreadable[0]
    )
