"""localfleet/base.py: the cached Debian 12 base root — its recipe key, its cache behaviour, and what is in it."""

import json
import subprocess
from dataclasses import asdict

import pytest

import localfleet.base as base_module
from localfleet.base import ADMIN_USER, INCLUDE, STAMP, Recipe, ensure_base
from localfleet.layout import Layout

from .conftest import needs_root


def test_the_cache_key_changes_with_every_part_of_the_recipe():
    keys = {Recipe().key, Recipe(include=INCLUDE + ("less",)).key, Recipe(suite="trixie").key,
            Recipe(mirror="http://mirror.example/debian").key, Recipe(version=Recipe().version + 1).key}
    assert len(keys) == 5
    assert Recipe().dir_name == f"bookworm-{Recipe().key}"


def test_a_stamped_base_is_reused_and_an_unstamped_one_is_rebuilt(tmp_path, monkeypatch):
    """Caching logic only: _build (debootstrap) is replaced by a recorder; the real build is tested below."""
    built = []
    monkeypatch.setattr(base_module, "_build", lambda layout, recipe, target: built.append(target))
    layout = Layout(tmp_path)
    target = layout.bases / Recipe().dir_name
    target.mkdir(parents=True)  # a base without its stamp: an interrupted build, never trusted
    assert ensure_base(layout) == target and built == [target]
    (target / STAMP).write_text("{}")
    assert ensure_base(layout) == target and built == [target]  # stamped: reused, not rebuilt


@needs_root
@pytest.mark.root
@pytest.mark.slow
def test_the_real_base_is_a_debian_12_workstation_template(base_root):
    def inside(*argv):
        return subprocess.run(["chroot", base_root, *argv], capture_output=True, text=True)

    assert json.loads((base_root / STAMP).read_text()) == json.loads(json.dumps(asdict(Recipe())))
    assert 'VERSION_CODENAME=bookworm' in (base_root / "etc/os-release").read_text()
    assert inside("python3", "-c", "import sys, venv, ensurepip; print(sys.version_info[:2])").stdout == "(3, 11)\n"
    installed = inside("dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n", *INCLUDE).stdout.split("\n")
    assert sorted(filter(None, installed)) == sorted(f"{p} installed" for p in INCLUDE)
    # Maintainer scripts may not start services: policy-rc.d answers 101 ("forbidden") to everything.
    assert inside("/usr/sbin/policy-rc.d", "ssh", "start").returncode == 101
    assert list((base_root / "etc/ssh").glob("ssh_host_*")) == []  # each host gets its own key
    assert "HostKey /etc/ssh/ssh_host_ed25519_key" in (base_root / "etc/ssh/sshd_config.d/localfleet.conf").read_text()
    assert inside("sudo", "-l", "-U", ADMIN_USER).stdout.strip().endswith("(ALL : ALL) NOPASSWD: ALL")
    assert any(base_root.glob("var/lib/apt/lists/*_bookworm_main_binary-amd64_Packages*"))
