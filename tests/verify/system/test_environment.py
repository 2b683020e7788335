"""verify/system/environment.py: the loader's variables as a login sets them, read from files in the forms real
systems have (pam_env's /etc/environment, a profile.d script a ROCm guide suggests, the venv's activate with a line
appended, systemd's environment.d) — nothing sourced, and every form not understood reported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from verify.ld.fsview import FileSystemView
from verify.system.environment import parse_assignments, parse_preload, read_loader_environment

# /etc/environment as Ubuntu ships it, plus the line guides give for ROCm.
ETC_ENVIRONMENT = (
    'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"\n'
    'LD_LIBRARY_PATH="/opt/rocm/lib"\n'
)
ROCM_PROFILE = """# added by hand after a ROCm guide
export PATH=$PATH:/opt/rocm/bin
export LD_LIBRARY_PATH=/opt/rocm/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -d /opt/rocm/lib64 ]; then
    export LD_LIBRARY_PATH="/opt/rocm/lib64:$LD_LIBRARY_PATH"
fi
LD_PRELOAD=$(ls /opt/hack/*.so)
BNB_ROCM_VERSION=71
"""


def test_pam_environment_lines_no_expansion():
    current = {}
    settings, unparsed = parse_assignments(
        'LD_LIBRARY_PATH="$HOME/lib"\nexport BNB_ROCM_VERSION=72\n# LD_PRELOAD=x\n',
        "/etc/environment",
        current,
        shell=False,
        expand=False,
    )
    assert [(s.name, s.value, s.exported) for s in settings] == [
        ("LD_LIBRARY_PATH", "$HOME/lib", True),
        ("BNB_ROCM_VERSION", "72", True),
    ]
    assert unparsed == []


def test_a_profile_script_in_simple_forms_conditions_and_what_is_not_understood():
    current = {"LD_LIBRARY_PATH": "/opt/rocm/lib"}
    settings, unparsed = parse_assignments(ROCM_PROFILE, "/etc/profile.d/rocm.sh", current, shell=True, expand=True)
    assert [s.describe() for s in settings] == [
        "LD_LIBRARY_PATH=/opt/rocm/lib:/opt/rocm/lib (/etc/profile.d/rocm.sh:3)",
        "LD_LIBRARY_PATH=/opt/rocm/lib64:/opt/rocm/lib:/opt/rocm/lib (/etc/profile.d/rocm.sh:5: conditional)",
        "BNB_ROCM_VERSION=71 (/etc/profile.d/rocm.sh:8: not exported)",
    ]
    assert [u.describe() for u in unparsed] == ["/etc/profile.d/rocm.sh:7: 'LD_PRELOAD=$(ls /opt/hack/*.so)'"]


@pytest.mark.parametrize(
    "line, value",
    [
        ("export LD_LIBRARY_PATH=/a", "/a"),
        ("export LD_LIBRARY_PATH='/a b'", "/a b"),
        ('export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-/d}:/a"', "/d:/a"),
        ("LD_LIBRARY_PATH=/a; export LD_LIBRARY_PATH", "/a"),
        ("unset LD_LIBRARY_PATH", None),
    ],
)
def test_the_simple_forms_agree_with_a_real_shell(line, value):
    """The oracle is sh itself: the same line run by dash, and the variable's value in the environment it exports."""
    settings, unparsed = parse_assignments(line + "\n", "x.sh", {}, shell=True, expand=True)
    assert unparsed == [] and settings[-1].value == value
    done = subprocess.run(
        ["sh", "-c", f"{line}\n{sys.executable} -c 'import os; print(os.environ.get(\"LD_LIBRARY_PATH\"))'"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert done.stdout.strip() == str(value)


def test_preload_file_separators():
    assert parse_preload("/usr/lib/libfoo.so /usr/lib/libbar.so:/x.so\n\t/y.so\n") == (
        "/usr/lib/libfoo.so",
        "/usr/lib/libbar.so",
        "/x.so",
        "/y.so",
    )


def test_every_source_read_in_a_systems_order(tmp_path):
    root = tmp_path
    for path, text in {
        "etc/environment": ETC_ENVIRONMENT,
        "etc/profile.d/rocm.sh": "export LD_LIBRARY_PATH=/opt/rocm-6.4.1/lib:$LD_LIBRARY_PATH\n",
        "etc/profile.d/readme.txt": "export LD_LIBRARY_PATH=/ignored\n",  # /etc/profile reads *.sh only
        "usr/lib/environment.d/50-rocm.conf": "BNB_ROCM_VERSION=72\n",
        "etc/environment.d/50-rocm.conf": "BNB_ROCM_VERSION=71\n",  # hides the /usr/lib one of the same name
        "opt/venv/bin/activate": (
            'VIRTUAL_ENV="/opt/venv"\nexport VIRTUAL_ENV\nexport LD_PRELOAD="$VIRTUAL_ENV/lib/x.so"\n'
        ),
        "etc/ld.so.preload": "/usr/lib/x86_64-linux-gnu/libhack.so\n",
        "etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n",
        "etc/ld.so.conf.d/rocm.conf": "/opt/rocm/lib\n/opt/rocm/lib64\n",
        "etc/ld.so.conf.d/x86_64-linux-gnu.conf": "/usr/lib/x86_64-linux-gnu\n",
        "usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator": "",
        "usr/lib/systemd/user-environment-generators/60-vendor-magic": "",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    found = read_loader_environment(FileSystemView(str(root)), "/opt/venv")
    assert [s.describe() for s in found.settings] == [
        "LD_LIBRARY_PATH=/opt/rocm/lib (/etc/environment:2)",
        "BNB_ROCM_VERSION=71 (/etc/environment.d/50-rocm.conf:1)",
        "LD_LIBRARY_PATH=/opt/rocm-6.4.1/lib:/opt/rocm/lib (/etc/profile.d/rocm.sh:1)",
        "LD_PRELOAD=/opt/venv/lib/x.so (/opt/venv/bin/activate:3)",
    ]
    assert found.preload == ("/usr/lib/x86_64-linux-gnu/libhack.so",)
    assert found.unknown_generators == ("/usr/lib/systemd/user-environment-generators/60-vendor-magic",)
    assert found.rocm_conf_dirs == ("/opt/rocm/lib", "/opt/rocm/lib64")
    assert found.unparsed == () and found.unreadable == ()


def test_a_fifo_planted_as_etc_environment_is_named_not_read(tmp_path):
    (tmp_path / "etc").mkdir()
    os.mkfifo(tmp_path / "etc/environment")
    found = read_loader_environment(FileSystemView(str(tmp_path)), "/opt/venv")
    assert found.settings == () and len(found.unreadable) == 1 and "a FIFO (a named pipe" in found.unreadable[0]
