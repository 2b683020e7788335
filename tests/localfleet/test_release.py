"""localfleet/release.py: releasing a tree that served as a root — processes, nested mounts, busy mounts, deletion."""

import logging
import subprocess
import sys

import pytest

from localfleet.errors import FleetError
from localfleet.mounts import mount
from localfleet.release import release_tree, remove_tree

from ..support.fleet_checks import leftovers
from .conftest import chrooted_python, needs_root

pytestmark = [needs_root, pytest.mark.root]


def _tree_with_mounts_and_a_process(tree):
    (tree / "proc").mkdir(parents=True)
    (tree / "dev").mkdir()
    mount("proc", tree / "proc", "proc")
    mount("tmpfs", tree / "dev", "tmpfs")
    (tree / "dev" / "pts").mkdir()
    mount("devpts", tree / "dev" / "pts", "devpts", 0, "newinstance")
    # A process rooted in the tree that also keeps a mount busy (its cwd is in it).
    holder = chrooted_python(tree, "os.chdir('/dev'); print('in', flush=True); signal.pause()")
    assert holder.stdout.readline() == "in\n"
    return holder


def test_release_stops_the_process_and_unmounts_nested_mounts_deepest_first(tmp_path):
    tree = tmp_path / "tree"
    holder = _tree_with_mounts_and_a_process(tree)
    try:
        assert len(leftovers(tree)) == 4  # three mounts and the process
        release_tree(tree)
        assert leftovers(tree) == []
    finally:
        holder.kill()
        holder.wait()


def test_a_mount_kept_busy_from_outside_the_tree_is_detached_lazily_with_a_warning(tmp_path, caplog):
    tree = tmp_path / "tree"
    (tree / "data").mkdir(parents=True)
    mount("tmpfs", tree / "data", "tmpfs")
    # Root "/", cwd inside the mount: not a process of the tree, so release_tree must not kill it, but it makes
    # a plain umount fail with EBUSY.
    outsider = subprocess.Popen(
        [sys.executable, "-c", "import signal; print('in', flush=True); signal.pause()"],
        cwd=tree / "data",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert outsider.stdout.readline() == "in\n"
        with caplog.at_level(logging.WARNING, logger="localfleet.release"):
            release_tree(tree, grace_s=0.2)
        assert leftovers(tree) == []
        assert "lazy unmount" in caplog.text
        assert outsider.poll() is None  # not ours to kill
    finally:
        outsider.kill()
        outsider.wait()


def test_remove_tree_deletes_only_inside_its_directory_and_only_after_releasing(tmp_path):
    owned = tmp_path / "owned"
    tree = owned / "fleet"
    holder = _tree_with_mounts_and_a_process(tree)
    try:
        with pytest.raises(FleetError, match="not inside localfleet's directory"):
            remove_tree(tmp_path, inside=owned)
        remove_tree(tree, inside=owned)
        assert not tree.exists() and leftovers(tmp_path) == []
        remove_tree(tree, inside=owned)  # nothing there any more: nothing to do
    finally:
        holder.kill()
        holder.wait()
