"""Host data for pyinfra's @fake connector: what each fact command of stages 1-3 answers on typical AMD workstations.

These are mocks of hosts that cannot exist here (Ubuntu with AMD's repositories and a GPU). The answers are in the
formats of the real commands (the same commands run for real in tests/roles/*/test_facts.py and
tests/tasks/test_real_fleet.py). An inventory for the @fake connector uses them as host data:

    hosts = [("@fake/ws-noble", fake_workstations.host("fresh_noble"))]

Unmatched commands succeed with no output (the @fake connector's default): facts of later stages then see an empty
host. Stages other than 1-3 add their own answers with `host(kind, extra_responses)`.
"""

from __future__ import annotations

import re

NOBLE = [
    'PRETTY_NAME="Ubuntu 24.04.2 LTS"',
    'NAME="Ubuntu"',
    'VERSION_ID="24.04"',
    'VERSION="24.04.2 LTS (Noble Numbat)"',
    "VERSION_CODENAME=noble",
    "ID=ubuntu",
    "ID_LIKE=debian",
    "UBUNTU_CODENAME=noble",
]
JAMMY = [
    'PRETTY_NAME="Ubuntu 22.04.5 LTS"',
    'NAME="Ubuntu"',
    'VERSION_ID="22.04"',
    'VERSION="22.04.5 LTS (Jammy Jellyfish)"',
    "VERSION_CODENAME=jammy",
    "ID=ubuntu",
    "ID_LIKE=debian",
    "UBUNTU_CODENAME=jammy",
]
FOCAL = [
    'NAME="Ubuntu"',
    'VERSION="20.04.6 LTS (Focal Fossa)"',
    "ID=ubuntu",
    'PRETTY_NAME="Ubuntu 20.04.6 LTS"',
    'VERSION_ID="20.04"',
    "VERSION_CODENAME=focal",
    "UBUNTU_CODENAME=focal",
]
RX7900XT = [
    "kfd yes",
    "pci 0000:00:00.0 0x1022 0x060000 0x14d8",
    "pci 0000:03:00.0 0x1002 0x030000 0x744c",
    "pci 0000:03:00.1 0x1002 0x040300 0xab30",
]
DISK = [
    "/opt /dev/nvme0n1p2 960303848 180303848 780000000 19% /",
    "/opt/rocm-fleet/venv /dev/nvme0n1p2 960303848 180303848 780000000 19% /",
]
USERS = ["maria:x:1000:1000:Maria,,,:/home/maria:/bin/bash", "root:x:0:0:root:/root:/bin/bash"]
GROUPS_FRESH = ["group render", "group video", "user maria: maria adm cdrom sudo plugdev"]
GROUPS_DONE = ["group render", "group video", "user maria: maria adm cdrom sudo plugdev render video"]
ROCM_NONE = ["opt-rocm "]
ROCM_724 = [
    "tree /opt/rocm-7.2.4 7.2.4-93",
    "opt-rocm /opt/rocm-7.2.4",
    "pkg rocm 7.2.4.70204-93~24.04 ii ",
    "pkg rocm-core 7.2.4.70204-93~24.04 ii ",
]
INSTALLER_724 = ["amdgpu-install\t7.2.4.70204-1\tii "]
LISTS_NOBLE = [
    "==> /etc/apt/sources.list.d/rocm.list",
    "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/7.2.4 noble main",
    "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/graphics/7.2.4/ubuntu noble main",
    "==> /etc/apt/sources.list.d/amdgpu.list",
    "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/amdgpu/30.30.4/ubuntu noble main",
]
# The KernelDriver fact on a noble workstation: generic kernel with linux-modules-extra, amdgpu loaded (the format of
# the real command, tests/roles/debian/facts/KernelDriver/).
KERNEL_NOBLE = [
    "running 6.8.0-51-generic",
    "modules 6.8.0-51-generic /lib/modules/6.8.0-51-generic/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst",
    "image 6.8.0-51-generic",
    "loaded yes",
    "kfd yes",
    "reboot-required no",
    "cmdline BOOT_IMAGE=/vmlinuz-6.8.0-51-generic root=UUID=0c1e5a0e-6f1a-4e2b-9d4e-2f7f1c9a3b11 ro quiet splash",
    "pkg linux-generic\t6.8.0-51.52\tii \tlinux-image-generic (= 6.8.0-51.52), linux-headers-generic (= 6.8.0-51.52)",
    "pkg linux-image-generic\t6.8.0-51.52\tii \tlinux-image-6.8.0-51-generic, linux-modules-extra-6.8.0-51-generic",
    "pkg linux-image-6.8.0-51-generic\t6.8.0-51.52\tii \tlinux-modules-6.8.0-51-generic",
    "pkg linux-modules-6.8.0-51-generic\t6.8.0-51.52\tii \t",
    "pkg linux-modules-extra-6.8.0-51-generic\t6.8.0-51.52\tii \t",
    "pkg linux-headers-6.8.0-51-generic\t6.8.0-51.52\tii \t",
    "available linux-headers-6.8.0-51-generic",
    "available linux-modules-extra-6.8.0-51-generic",
]
AMD_PIN = [
    "==> /etc/apt/preferences.d/repo-radeon-pin-600",
    "Package: *",
    "Pin: release o=repo.radeon.com",
    "Pin-Priority: 600",
    "",
]
ADDUSER_FRESH = ["==> /etc/adduser.conf", '#EXTRA_GROUPS="users"', "#ADD_EXTRA_GROUPS=0"]
ADDUSER_DONE = ["==> /etc/adduser.conf", 'EXTRA_GROUPS="users render video"', "ADD_EXTRA_GROUPS=1"]
# The VenvPathAccess fact (roles/debian/facts.py): /opt/rocm-fleet/venv under root's own /opt.
VENV_PATH_ACCESS = [
    "owner 0",
    "resolved /opt/rocm-fleet",
    "dir 0 0 41ed root root /",
    "dir 0 0 41ed root root /opt",
    "group root:x:0:",
    "primary 0 root",
]
UBUNTU_COLLIDING = ["rocminfo\t5.7.1-3build1\tii ", "hipcc\t5.7.1-3\tii ", "rocm-cmake\t6.0.0-1\tii "]
UBUNTU_REMOVAL = ["Remv hipcc [5.7.1-3]", "Remv rocm-cmake [6.0.0-1]", "Remv rocminfo [5.7.1-3build1]"]


def _answers(
    os_release,
    rocm=ROCM_NONE,
    installer=(),
    lists=(),
    colliding=(),
    removal=(),
    groups=GROUPS_FRESH,
    pins=(),
    adduser=ADDUSER_FRESH,
):
    # Insertion order matters: the first matching key answers. InstalledRocm's command also runs dpkg-query.
    return {
        "realpath -m": VENV_PATH_ACCESS,  # before "getent passwd": its command runs getent too
        'echo "running $r"': KERNEL_NOBLE,
        "/etc/apt/preferences.d/*": list(pins),
        "/etc/adduser.conf": list(adduser),
        "readlink -e /opt/rocm": list(rocm),
        "cat /etc/os-release": list(os_release),
        "/sys/bus/pci/devices": RX7900XT,
        "df -Pk": DISK,
        "getent passwd": USERS,
        "getent group": list(groups),
        "sources.list.d/rocm.list": list(lists),
        "apt-get -s remove": list(removal),
        re.compile(r"dpkg-query .*' amdgpu-install 2>/dev/null"): list(installer),
        re.compile(r"dpkg-query .*' rocminfo hipcc rocm-cmake rocm-device-libs 2>/dev/null"): list(colliding),
    }


KINDS = {
    "fresh_noble": _answers(NOBLE),
    "fresh_jammy": _answers(JAMMY),
    "provisioned_noble": _answers(
        NOBLE,
        rocm=ROCM_724,
        installer=INSTALLER_724,
        lists=LISTS_NOBLE,
        groups=GROUPS_DONE,
        pins=AMD_PIN,
        adduser=ADDUSER_DONE,
    ),
    "colliding_noble": _answers(NOBLE, colliding=UBUNTU_COLLIDING, removal=UBUNTU_REMOVAL),
    "focal": _answers(FOCAL),
}


def host(kind: str, extra_responses: dict | None = None, **data) -> dict:
    """Host data for one @fake workstation of `kind` (see KINDS), logged in as an admin with sudo."""
    return {
        "fake_responses": {**(extra_responses or {}), **KINDS[kind]},
        "fake_delay": 0,
        "fake_delay_jitter": 0,
        "_sudo": True,
        "workstation_users": ["maria"],
        **data,
    }
