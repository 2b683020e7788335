"""roles/debian/kernel.py: the KernelDriver fact's model — what boots next, what is pending, which of AMD's kernel
prerequisites the ROCm stage installs — on the recorded outputs of tests/roles/debian/facts/KernelDriver/."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest

from localfleet import Fleet
from roles.debian import facts
from roles.debian.kernel import FIRMWARE_PACKAGE
from tests.support.debs import build_deb
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
    assert kernels.meta_statement().startswith(
        "linux-virtual does not bring linux-modules-extra: the kernels it brings have no amdgpu.ko"
    )


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
    firmware) that dpkg has not installed; the oracle is this machine's real apt-cache asked name by name (`show`, as
    the fact did before it asked `policy`). The running kernel is made one apt has packages for, through a `uname`
    first on PATH."""
    names = subprocess.run(["apt-cache", "pkgnames", "linux-headers-"], capture_output=True, text=True).stdout.split()
    releases = sorted(n.removeprefix("linux-headers-") for n in names if re.fullmatch(r"linux-headers-\d[\w.+~-]*", n))
    if not releases:
        pytest.skip("this machine's apt knows no linux-headers-<release> package (no apt lists)")
    release = releases[-1]
    fake = tmp_path / "uname"
    fake.write_text(f"#!/bin/sh\necho {release}\n")
    fake.chmod(0o755)
    command = facts.KernelDriver().command()
    done = subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"},
    )
    kernels = process_fact(facts.KernelDriver, done.stdout.splitlines())
    assert kernels.running == release
    newest = sorted(p.name.removeprefix("vmlinuz-") for p in Path("/boot").glob("vmlinuz-*"))
    wanted = {f"linux-{kind}-{k}" for k in {release, *newest[-1:]} for kind in ("headers", "modules-extra")}
    wanted.add(FIRMWARE_PACKAGE)
    oracle = {name for name in wanted if _apt_has(name, _here)} - _dpkg_installed(wanted, _here)
    assert f"linux-headers-{release}" in oracle
    assert kernels.available == oracle


def _here(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def _apt_has(name: str, run) -> bool:
    """Whether apt has a version of `name` to install, asked with `run` (argv -> CompletedProcess) the way the fact
    asked before it used `policy`. A record, not the exit status: apt-cache exits 0 for a name apt knows only as
    referenced by another package, with no version to install (firmware-amd-graphics without Debian's
    non-free-firmware component)."""
    return f"Package: {name}\n" in run(["/usr/bin/apt-cache", "show", "--no-all-versions", name]).stdout


def _dpkg_installed(names, run) -> set[str]:
    """The names dpkg has installed (status ii or hi), asked of dpkg name by name."""
    return {
        name
        for name in names
        if run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", name]).stdout.strip()[:2] in ("ii", "hi")
    }


# Inside a fleet host: a `uname` saying a release the host's apt has headers for, and an `apt-cache` that notes each
# call's arguments and runs the real one.
_UNAME = "#!/bin/sh\necho {release}\n"
_APT_CACHE_CALLS = "/var/log/apt-cache-calls"
_APT_CACHE = f"""#!/bin/sh
printf '%s\\n' "$*" >> {_APT_CACHE_CALLS}
exec /usr/bin/apt-cache "$@"
"""


@pytest.mark.slow
@pytest.mark.root
def test_on_a_fleet_host_apt_is_asked_only_about_what_dpkg_has_not_installed(tmp_path):
    """Issue 12: the fact's `apt-cache show` loaded apt's whole cache on every run (1.3 s per host per no-op run in
    bench/fleet_scale.py), also when dpkg had installed every name asked, where apt's answer decides nothing. Now apt
    is asked (`policy`) only about the names dpkg has not installed, and not at all when there are none. On a real
    Debian 12 host (localfleet), with real dpkg and apt: what the ROCm stage installs (driver_packages_wanted) is
    the oracle's — apt-cache show name by name, minus what dpkg-query says is installed — in every state, as
    packages of those names are installed with dpkg (tiny stand-in packages: their names are what counts). And
    `apt-cache policy` is never given a name apt does not know (it would read it as a regular expression and match it
    against every package name: Debian has no linux-modules-extra-*): each name is first looked up by prefix
    (`pkgnames`), alone."""
    with Fleet.up(n=1) as fleet:
        host = fleet.hosts[0]

        def inside(argv: list[str]) -> subprocess.CompletedProcess:
            return host.run(argv, check=False)

        names = host.run(["apt-cache", "pkgnames", "linux-headers-"]).stdout.split()
        releases = sorted(
            n.removeprefix("linux-headers-") for n in names if re.fullmatch(r"linux-headers-\d[\w.+~-]*-amd64", n)
        )
        assert releases, "the fleet host's apt knows no linux-headers-<release>-amd64"
        release = releases[-1]
        for name, text in (("uname", _UNAME.format(release=release)), ("apt-cache", _APT_CACHE)):
            (host.root / "usr/local/bin" / name).write_text(text)
            (host.root / "usr/local/bin" / name).chmod(0o755)
        calls = host.root / _APT_CACHE_CALLS.lstrip("/")
        asked = [f"linux-headers-{release}", f"linux-modules-extra-{release}", FIRMWARE_PACKAGE]

        def fact():
            """The fact read inside the host, and the package names each `apt-cache policy` call was asked about,
            checking on the way that every name was first looked up alone with `pkgnames`."""
            calls.write_text("")
            done = host.run(["sh", "-c", facts.KernelDriver().command()])
            policy, looked_up = [], []
            for line in calls.read_text().splitlines():
                subcommand, *names = [word for word in line.split() if not word.startswith("-")]
                (policy.append(names) if subcommand == "policy" else looked_up.extend(names))
                assert subcommand in ("policy", "pkgnames"), line
            assert all(name in looked_up for names in policy for name in names)
            return process_fact(facts.KernelDriver, done.stdout.splitlines()), policy, looked_up

        def oracle() -> tuple[str, ...]:
            installed = _dpkg_installed(asked, inside)
            return tuple(name for name in asked if _apt_has(name, inside) and name not in installed)

        def install(name: str) -> None:
            deb = build_deb(tmp_path, {"Package": name, "Version": "0.0-standin", "Architecture": "all"})
            (host.root / "tmp" / deb.name).write_bytes(deb.read_bytes())
            host.run(["dpkg", "-i", f"/tmp/{deb.name}"])

        known = {name for name in asked if name in host.run(["apt-cache", "pkgnames", name]).stdout.split()}
        assert f"linux-headers-{release}" in known and f"linux-modules-extra-{release}" not in known  # Debian's
        kernels, called, looked_up = fact()
        assert kernels.running == release
        assert kernels.driver_packages_wanted() == oracle() == (f"linux-headers-{release}",)
        assert looked_up == asked
        assert called == [[name for name in asked if name in known]]

        # Without apt's candidates (preflight where the ROCm stage does not run): apt is not started; the rest is
        # the same answer.
        calls.write_text("")
        command = facts.KernelDriver().command(apt_candidates=False)
        bare = process_fact(facts.KernelDriver, host.run(["sh", "-c", command]).stdout.splitlines())
        assert calls.read_text() == ""
        assert bare == dataclasses.replace(kernels, available=frozenset()) and kernels.available

        install(f"linux-headers-{release}")
        kernels, called, looked_up = fact()
        assert kernels.driver_packages_wanted() == oracle() == ()
        assert looked_up == asked[1:]  # the installed one is not asked
        assert called == ([[name for name in asked[1:] if name in known]] if known - {asked[0]} else [])

        install(f"linux-modules-extra-{release}")
        install(FIRMWARE_PACKAGE)
        kernels, called, looked_up = fact()
        assert kernels.driver_packages_wanted() == oracle() == ()
        assert called == looked_up == []  # dpkg has every name: apt is not started
        assert {p.name for p in kernels.packages if p.installed} >= set(asked)
