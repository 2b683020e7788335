"""The whole deploy (deploy.py) through pyinfra's @fake connector, for hosts that cannot exist here — Ubuntu noble and
jammy workstations with an AMD GPU and AMD's repositories, one already provisioned, one with Ubuntu's colliding
packages, one on an unsupported release. Each fake host answers the fact commands of stages 1-3 as a real one would
(tests/support/fake_workstations.py); these tests are mocks, and say so. What they prove: the plan — which operations
change which host, with exactly which commands — and that an unfit host stops with one line and nothing else runs on
it.

Stages 4-6 belong to other parts; their operations appear in the plan but are not asserted here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from roles.debian import facts as debian_facts
from roles.preflight import facts as preflight_facts
from roles.settings import check_data
from tests.support import fake_workstations
from tests.support.deploy_stages import deploy_stages

pytestmark = pytest.mark.slow  # three pyinfra runs over five fake hosts (~10 s)

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
OURS = ("tasks/preflight.py | ", "tasks/colliding_packages.py | ", "tasks/rocm.py | ")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PYINFRA_PROGRESS": "off"}
LOCK = "[dpkg lock wait 300 s] "
APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
DEB = "/var/cache/rocm-fleet/amdgpu-install_7.2.4.70204-1_all.deb"


@pytest.fixture(scope="module")
def inventory(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("fake")
    path = directory / "lab.py"
    # reports_dir: the verification stage writes its reports on the controller; keep them out of the checkout.
    path.write_text(
        "from tests.support import fake_workstations as fw\n\n"
        f"lab = [(f'@fake/{{kind}}', fw.host(kind, reports_dir={str(directory / 'reports')!r}))\n"
        "       for kind in fw.KINDS]\n"
    )
    return path


@pytest.fixture(scope="module")
def whole_plan(inventory) -> dict[str, list[dict]]:
    """Per host: every operation of every stage with its commands, as pyinfra computes them while planning."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.pyinfra_plan", str(inventory), "deploy.py"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {host.removeprefix("@fake/"): ops for host, ops in json.loads(done.stdout).items()}


@pytest.fixture(scope="module")
def plan(whole_plan) -> dict[str, list[dict]]:
    """Per host: the operations of stages 1-3."""
    return {host: [op for op in ops if op["name"].startswith(OURS)] for host, ops in whole_plan.items()}


@pytest.fixture(scope="module")
def dry(inventory) -> dict:
    done = subprocess.run(
        [PYINFRA, str(inventory), "deploy.py", "--dry", "--json"], capture_output=True, text=True, cwd=REPO, env=ENV
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def run(inventory) -> tuple[int, str]:
    """deploy.py executed on the fakes (-vv: every command sent to a host is echoed). Later stages fail every fake
    host (no verifier runs on a fake), so pyinfra ends with "No hosts remaining!" and prints no JSON results."""
    done = subprocess.run(
        [PYINFRA, str(inventory), "deploy.py", "-y", "-vv"], capture_output=True, text=True, cwd=REPO, env=ENV
    )
    return done.returncode, done.stderr


@pytest.fixture(scope="module")
def run_stages(inventory) -> dict:
    """Stages 1-3 executed on the fakes in one run (the task files in deploy.py's order): pyinfra's JSON results."""
    done = subprocess.run(
        [PYINFRA, str(inventory), "tasks/preflight.py", "tasks/colliding_packages.py", "tasks/rocm.py", "-y", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
    )
    assert done.returncode == 1, done.stderr[-3000:]  # the focal host fails
    return json.loads(done.stdout)["results"]


def _steps(ops: list[dict]) -> list[tuple[str, list[str]]]:
    return [(op["name"].split(" | ", 1)[1], op["commands"]) for op in ops]


def _fresh_plan(codename: str) -> list[tuple[str, list[str]]]:
    url = f"https://repo.radeon.com/amdgpu-install/7.2.4/ubuntu/{codename}/amdgpu-install_7.2.4.70204-1_all.deb"
    # pyinfra's temp name (sha1 of the destination), in the root-owned cache directory rather than /tmp
    temp = "/var/cache/rocm-fleet/pyinfra-b0b16bba445ea152d83914086fee36e8f1eafb88"
    return [
        ("Preflight | host is fit", []),
        ("Colliding packages | Remove distro packages that block amdgpu-install", []),
        (
            "ROCm | Directory /var/cache/rocm-fleet",
            [
                "mkdir -p /var/cache/rocm-fleet",
                "chmod 755 /var/cache/rocm-fleet",
                "chown root:root /var/cache/rocm-fleet",
            ],
        ),
        (
            "ROCm | Download amdgpu-install_7.2.4.70204-1_all.deb",
            [
                f"( curl -sSLf {url} -o {temp} ) || ( wget -q {url} -O {temp} || ( rm -f {temp} ; exit 1 ) )",
                f"mv {temp} {DEB}",
            ],
        ),
        ("ROCm | Install amdgpu-install 7.2.4.70204-1", [f"{LOCK}{APT} install {DEB}"]),
        # Planned on a host without the installer, the lists are checked when the operation runs, after it.
        ("ROCm | Check AMD's apt lists", []),
        ("ROCm | AMD's apt pin (o=repo.radeon.com, 600)", []),  # likewise: the installer deb brings it
        (
            "ROCm | amdgpu-install --usecase=rocm --no-dkms (ROCm 7.2.4)",
            [
                f"{LOCK}{APT} update",
                f"{LOCK}amdgpu-install -y --usecase=rocm --no-dkms",
                "test -d /opt/rocm-7.2.4 || "
                "{ echo 'amdgpu-install ended without creating /opt/rocm-7.2.4: read its output above' >&2; exit 1; }",
            ],
        ),
        ("ROCm | /opt/rocm -> /opt/rocm-7.2.4", []),
        ("ROCm | Kernel packages for the in-box amdgpu driver", []),  # generic kernel: modules-extra is there
        ("GPU access | workstation_users in render and video", ["usermod -a -G render,video maria"]),
        (
            "GPU access | New accounts join render and video (/etc/adduser.conf)",
            [
                'printf %s \'#EXTRA_GROUPS="users"\n#ADD_EXTRA_GROUPS=0\n\n# rocm-fleet: new accounts join the GPU '
                "groups (AMD'\"'\"'s post-install docs)\nADD_EXTRA_GROUPS=1\nEXTRA_GROUPS=\"users render video\"\n' > "
                "/etc/adduser.conf.rocm-fleet-new && chmod 644 /etc/adduser.conf.rocm-fleet-new && mv -f "
                "/etc/adduser.conf.rocm-fleet-new /etc/adduser.conf"
            ],
        ),
    ]


def test_fresh_noble_plan_is_exactly_this(plan):
    """Mock of a fresh Ubuntu 24.04 workstation with an RX 7900 XT."""
    assert _steps(plan["fresh_noble"]) == _fresh_plan("noble")


def test_fresh_jammy_takes_the_jammy_installer(plan):
    """Mock of a fresh Ubuntu 22.04 workstation."""
    assert _steps(plan["fresh_jammy"]) == _fresh_plan("jammy")


def test_the_installer_is_downloaded_only_into_root_s_own_directory(plan):
    """Issue 9: root's curl must not write to a name another account can plant first (pyinfra's default, a
    predictable /tmp/pyinfra-<sha1 of the destination>, symlink or FIFO); every path the download writes is in the
    installer cache, which the step before makes root's own with mode 755."""
    for kind in ("fresh_noble", "fresh_jammy"):
        steps = dict(_steps(plan[kind]))
        assert steps["ROCm | Directory /var/cache/rocm-fleet"][-2:] == [
            "chmod 755 /var/cache/rocm-fleet",
            "chown root:root /var/cache/rocm-fleet",
        ]
        download = next(commands for name, commands in steps.items() if name.startswith("ROCm | Download "))
        written = {path for command in download for path in re.findall(r"(?:-o|-O|mv \S+) (\S+)", command)}
        written |= {command.split()[1] for command in download if command.startswith("mv ")}
        assert written and all(path.startswith("/var/cache/rocm-fleet/") for path in written), download


def test_dry_run_shows_the_same_changes(dry):
    """The real CLI's --dry: the operations of stages 1-3 that would change each host."""
    changed = {}
    for op in dry["plan"]:
        if op["name"].startswith(OURS):
            for host in op["hosts_with_change"]:
                changed.setdefault(host.removeprefix("@fake/"), []).append(op["name"].split(" | ", 1)[1])
    fresh = [name for name, commands in _fresh_plan("noble") if commands]
    assert changed == {
        "fresh_noble": fresh,
        "fresh_jammy": fresh,
        "colliding_noble": ["Colliding packages | Remove distro packages that block amdgpu-install"] + fresh,
        "focal": ["Preflight | stop: host is not fit"],
    }


def test_provisioned_host_changes_nothing(plan):
    """Mock of a noble workstation with ROCm 7.2.4, AMD's lists and the groups in place: every operation a no-op."""
    assert [name for name, commands in _steps(plan["provisioned_noble"]) if commands] == []
    assert [name for name, _ in _steps(plan["provisioned_noble"])] == [
        "Preflight | host is fit",
        "Colliding packages | Remove distro packages that block amdgpu-install",
        "ROCm | Install amdgpu-install 7.2.4.70204-1",
        "ROCm | Check AMD's apt lists",
        "ROCm | AMD's apt pin (o=repo.radeon.com, 600)",
        "ROCm | amdgpu-install --usecase=rocm --no-dkms (ROCm 7.2.4)",
        "ROCm | /opt/rocm -> /opt/rocm-7.2.4",
        "ROCm | Kernel packages for the in-box amdgpu driver",
        "GPU access | workstation_users in render and video",
        "GPU access | New accounts join render and video (/etc/adduser.conf)",
    ]


def test_colliding_ubuntu_packages_removed_before_the_installer(plan):
    """Mock of noble with Ubuntu's rocminfo 5.7.1-3build1, hipcc 5.7.1-3, rocm-cmake 6.0.0-1 (ROCm #3656, #6367)."""
    steps = _steps(plan["colliding_noble"])
    assert steps[1] == (
        "Colliding packages | Remove distro packages that block amdgpu-install",
        [
            "tell: removing rocminfo 5.7.1-3build1 (distro; sorts above AMD's 1.0.0.70204), hipcc 5.7.1-3 (distro; "
            "sorts above AMD's 1.1.1.70204), rocm-cmake 6.0.0-1 (distro; sorts above AMD's 0.14.0.70204): apt would "
            "keep them and amdgpu-install would fail with unmet dependencies (ROCm #3656, #6367)",
            f"{LOCK}{APT} remove rocminfo hipcc rocm-cmake",
        ],
    )
    assert steps[2:] == _fresh_plan("noble")[2:]


def test_unsupported_os_stops_at_preflight_with_one_line_and_nothing_runs(plan, run):
    """Mock of an Ubuntu 20.04 host: it fails at preflight; the later stages 1-3 plan nothing for it but the one note
    every stage gives a stopped host (roles/stage.py), with no command."""
    skipped = "skipped: an earlier stage stopped this host"
    assert _steps(plan["focal"]) == [
        (
            "Preflight | stop: host is not fit",
            [
                "fail: preflight: Ubuntu 20.04.6 LTS (focal) is not supported (supported: Ubuntu 24.04 (noble), Ubuntu "
                "22.04 (jammy), Debian 12 (bookworm); Debian 13 only with rocm_install: skip): provision a supported OS"
            ],
        ),
        (f"Colliding packages | {skipped}", []),
        (f"ROCm | {skipped}", []),
        (f"GPU access | {skipped}", []),
    ]
    code, stderr = run
    assert code == 1
    # pyinfra pads host prefixes to one width: "[@fake/focal]      message".
    lines = [
        re.sub(r"^(\[[^\]]+\])\s+", r"\1 ", line.strip())
        for line in stderr.splitlines()
        if line.strip().startswith("[@fake/focal]")
    ]
    assert (
        "[@fake/focal] preflight: Ubuntu 20.04.6 LTS (focal) is not supported (supported: Ubuntu 24.04 (noble), "
        "Ubuntu 22.04 (jammy), Debian 12 (bookworm); Debian 13 only with rocm_install: skip): provision a "
        "supported OS"
    ) in lines
    # -vv echoes every command sent to a host: on this one, only read-only fact commands — those the stages read
    # ahead (deploy.py asks them before any stage plans), and preflight's.
    settings, problems = check_data(
        "@fake/focal",
        fake_workstations.host("focal"),
        foreign_keys=("fake_responses", "fake_delay", "fake_delay_jitter"),
    )
    assert settings is not None, problems
    read_only = {
        str(ask.fact().command(**ask.kwargs))
        for stage in deploy_stages().values()
        if stage.reads
        for ask in stage.reads(settings)
    }
    assert {
        debian_facts.OsReleaseFile().command(),
        preflight_facts.GpuDevices().command(),
        preflight_facts.FreeSpaceFor().command(["/opt", "/opt/rocm-fleet/venv"]),
    } <= read_only
    sent = [line.split(">>> ", 1)[1] for line in lines if ">>> " in line]
    # roles/run_reads.py sends the facts read ahead as one command (the @fake connector answers it with one fact's
    # reply, so each fact is then asked alone): each part of it must be a read-only fact command too.
    batched = (
        r'\( exec >"\$d/\d+"; trap \'echo "rocm-fleet-[0-9a-f]{32}-\d+ \$\?"\' EXIT; '
        r"echo rocm-fleet-[0-9a-f]{32}-\d+; (.*?) \) &"
    )
    parts = [part for command in sent for part in (re.findall(batched, command, flags=re.S) or [command])]
    assert any(
        command.startswith("d=$(mktemp -d -p /run rocm-fleet-answers.XXXXXXXXXX) || exit 0; ") for command in sent
    ), sent
    assert parts and set(parts) <= read_only, parts


def test_the_verifier_is_installed_once_per_host_for_all_the_stages_that_run_it(whole_plan):
    """Mock hosts: strays, the apt hook, the boot check and verification each run the installed verifier, and one
    run plans its install once per host, in the first of them (pyinfra 3 caches no facts: each further install
    would ask the host again only to find the verifier in place)."""
    first = "tasks/strays.py | Strays | Install the verifier"
    for host in ("fresh_noble", "provisioned_noble"):
        names = [op["name"] for op in whole_plan[host]]
        assert [name for name in names if "Install the verifier" in name] == [first], names
        # The later stages that run the verifier are still planned, after the install.
        for stage in ("tasks/apt_hook.py | Apt hook | ", "tasks/verify.py | Verify | Run the verifier"):
            assert any(name.startswith(stage) for name in names[names.index(first) :]), (stage, names)
    assert not any("Install the verifier" in op["name"] for op in whole_plan["focal"])  # stopped at preflight


def test_run_results_for_stages_1_to_3(run_stages):
    """Executed on the fakes: stages 1-3 succeed on the fit hosts (changing them) and change nothing when
    provisioned."""
    results = run_stages
    assert results["failed_hosts"] == ["@fake/focal"]
    # Task files given on the command line are not "included": their operation names have no "tasks/…" prefix.
    by_name = {op["name"]: op for op in results["operations"]}
    install = by_name["ROCm | amdgpu-install --usecase=rocm --no-dkms (ROCm 7.2.4)"]
    assert len(by_name) == 16, sorted(by_name)  # 13, and the notes of three stages that skip the stopped host
    assert install["success"] == ["@fake/colliding_noble", "@fake/fresh_jammy", "@fake/fresh_noble"]
    assert install["no_change"] == ["@fake/provisioned_noble"]
    for name, op in by_name.items():
        # pyinfra counts every operation planned for a host that failed before it as an error of that host: the stop,
        # and the notes that skip the host in the later stages.
        failed_here = "stop:" in name or "skipped: an earlier stage stopped this host" in name
        assert op["error"] == (["@fake/focal"] if failed_here else []), name
        assert "@fake/provisioned_noble" not in op["success"], name
    removal = by_name["Colliding packages | Remove distro packages that block amdgpu-install"]
    assert removal["success"] == ["@fake/colliding_noble"]
