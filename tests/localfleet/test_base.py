"""localfleet/base.py: the cached Debian 12 base root — its recipe key, its cache behaviour, what is in it, and the
host roots made from it (overlays, or copies where the kernel cannot make one)."""

import json
import os
import stat
import subprocess
from dataclasses import asdict

import pytest

import localfleet.base as base_module
from localfleet.base import ADMIN_USER, INCLUDE, STAMP, Recipe, ensure_base, overlay_base
from localfleet.layout import Layout
from localfleet.mounts import mount
from localfleet.release import release_tree
from localfleet.state import FleetState, save_state

from ..support.fleet_checks import mounts_inside
from .conftest import needs_root


def test_the_cache_key_changes_with_every_part_of_the_recipe():
    keys = {
        Recipe().key,
        Recipe(include=INCLUDE + ("less",)).key,
        Recipe(suite="trixie").key,
        Recipe(mirror="http://mirror.example/debian").key,
        Recipe(version=Recipe().version + 1).key,
    }
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
    assert "VERSION_CODENAME=bookworm" in (base_root / "etc/os-release").read_text()
    assert inside("python3", "-c", "import sys, venv, ensurepip; print(sys.version_info[:2])").stdout == "(3, 11)\n"
    installed = inside("dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n", *INCLUDE).stdout.split("\n")
    assert sorted(filter(None, installed)) == sorted(f"{p} installed" for p in INCLUDE)
    # Maintainer scripts may not start services: policy-rc.d answers 101 ("forbidden") to everything.
    assert inside("/usr/sbin/policy-rc.d", "ssh", "start").returncode == 101
    assert list((base_root / "etc/ssh").glob("ssh_host_*")) == []  # each host gets its own key
    assert "HostKey /etc/ssh/ssh_host_ed25519_key" in (base_root / "etc/ssh/sshd_config.d/localfleet.conf").read_text()
    assert inside("sudo", "-l", "-U", ADMIN_USER).stdout.strip().endswith("(ALL : ALL) NOPASSWD: ALL")
    assert any(base_root.glob("var/lib/apt/lists/*_bookworm_main_binary-amd64_Packages*"))


@needs_root
@pytest.mark.root
@pytest.mark.slow
def test_a_host_root_is_an_overlay_whose_writes_never_reach_the_base_or_another_host(base_root, tmp_path):
    layout = Layout.default()
    first, second = tmp_path / "first", tmp_path / "second"
    try:
        for root in (first, second):
            overlay_base(layout, base_root, root)
        assert (first / "etc/os-release").read_text() == (base_root / "etc/os-release").read_text()
        before = (base_root / "etc/debian_version").read_bytes(), (base_root / "etc/debian_version").stat().st_mode
        with open(first / "etc/debian_version", "a") as in_place:  # `>>`: written in place, not replaced
            in_place.write("written in place\n")
        (first / "etc/debian_version").chmod(0o600)
        (first / "usr/bin/env").unlink()
        assert (
            (base_root / "etc/debian_version").read_bytes(),
            (base_root / "etc/debian_version").stat().st_mode,
        ) == before
        assert (second / "etc/debian_version").read_bytes() == before[0] and (base_root / "usr/bin/env").exists()
        assert (second / "usr/bin/env").exists() and not (first / "usr/bin/env").exists()
        assert (tmp_path / "first-upper/etc/debian_version").is_file()  # the change lies in the host's own layer
    finally:
        for root in (first, second):
            release_tree(root)
    assert mounts_inside(tmp_path) == []


def test_a_base_that_a_fleet_uses_is_kept_when_another_recipe_is_built(tmp_path, monkeypatch):
    """Caching logic only (no debootstrap): hosts are overlays on their base, so pruning it would empty their roots."""
    layout = Layout(tmp_path)
    old, unused = layout.bases / "bookworm-old", layout.bases / "bookworm-unused"
    for base in (old, unused):
        base.mkdir(parents=True)
        (base / STAMP).write_text("{}")
    fleet_dir = layout.fleet_dir("f1")
    fleet_dir.mkdir(parents=True)
    save_state(fleet_dir, FleetState("f1", str(fleet_dir), str(old), "root", None))
    monkeypatch.setattr(
        base_module,
        "_build",
        lambda layout, recipe, target: (target / STAMP).parent.mkdir() or (target / STAMP).write_text("{}"),
    )
    new = ensure_base(layout)
    assert new.is_dir() and old.is_dir() and not unused.exists()


def _small_base(directory):
    """A few files of the kinds a root has (modes, owners, a set-uid program, a symlink), standing in for the ~290 MB
    base where only how a host root is made from it matters."""
    (directory / "etc").mkdir(parents=True)
    (directory / "etc/os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    (directory / "usr/bin").mkdir(parents=True)
    (directory / "usr/bin/sudo").write_bytes(b"\x7fELF stand-in")
    (directory / "usr/bin/sudo").chmod(0o4755)
    (directory / "home/admin").mkdir(parents=True)
    (directory / "home/admin").chmod(0o700)
    os.chown(directory / "home/admin", 1000, 1000)
    (directory / "bin").symlink_to("usr/bin")
    directory.chmod(0o755)
    return directory


def _tree(root):
    """Every entry under `root`: path, mode, owner, and content or link target."""
    entries = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        what = os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else None
        entries[str(path.relative_to(root))] = (info.st_mode, info.st_uid, info.st_gid, what)
    return entries


@needs_root
@pytest.mark.root
def test_a_host_roots_top_directory_is_the_bases_whatever_the_umask(tmp_path):
    """The chroot's / of an overlay root is its own layer's directory: made under a umask of 077 it would shut the
    admin account out of its own host."""
    base, root = _small_base(tmp_path / "base"), tmp_path / "host" / "root"
    layout = Layout(tmp_path / "cache")
    layout.bases.mkdir(parents=True)
    root.parent.mkdir()
    old = os.umask(0o077)
    try:
        overlay_base(layout, base, root)
        assert mounts_inside(root) == [str(root)]
        assert stat.S_IMODE(root.stat().st_mode) == 0o755
        assert _tree(root) == _tree(base)
    finally:
        os.umask(old)
        release_tree(root)
    assert mounts_inside(tmp_path) == []


@needs_root
@pytest.mark.root
def test_where_the_hosts_directory_cannot_hold_an_overlays_writable_layer_the_base_is_copied(tmp_path, caplog):
    """The kernel refuses an overlay as another overlay's writable layer — the case of a cache inside a container's
    root — so the host roots of a fleet there are made on a real overlayfs here: copies, with no layer of their own."""
    base = _small_base(tmp_path / "base")
    layout = Layout(tmp_path / "cache")
    layout.bases.mkdir(parents=True)
    filesystem = tmp_path / "overlayfs"
    for directory in ("lower", "upper", "work", "overlayfs"):
        (tmp_path / directory).mkdir()
    mount(
        "overlay",
        filesystem,
        "overlay",
        0,
        f"lowerdir={tmp_path}/lower,upperdir={tmp_path}/upper,workdir={tmp_path}/work",
    )
    try:
        root = filesystem / "host" / "root"
        root.parent.mkdir()
        overlay_base(layout, base, root)
        assert f"cannot mount an overlay of {base} at {root}" in caplog.text and "copying it instead" in caplog.text
        assert mounts_inside(filesystem) == [str(filesystem)]  # no mount of its own: a copy
        assert sorted(p.name for p in root.parent.iterdir()) == ["root"]  # no layer of its own (own_layer) left
        assert _tree(root) == _tree(base) and stat.S_IMODE(root.stat().st_mode) == 0o755
        (root / "etc/os-release").write_text("changed in the host\n")
        assert (base / "etc/os-release").read_text().startswith("PRETTY_NAME=")
    finally:
        release_tree(filesystem)
    assert mounts_inside(tmp_path) == []
