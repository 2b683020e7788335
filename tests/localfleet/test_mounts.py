"""localfleet/mounts.py: mountinfo parsing, and real mount/umount calls checked against /proc/self/mountinfo."""

import pytest

from localfleet.mounts import mount, mount_overlay, mounts_under, parse_mountinfo, umount

from ..support.fleet_checks import mounts_inside
from .conftest import needs_root

# Two lines as the kernel writes them (a mount point with a space in it is escaped as \040).
MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
101 27 0:50 / /srv/fleet\\040one/ws1/proc rw,nosuid - proc proc rw
102 101 0:51 / /srv/fleet\\040one/ws1/proc/sub rw - tmpfs tmpfs\\040x rw
103 27 0:52 / /srv/fleet\\040oneX rw - tmpfs tmpfs rw
"""


def test_parse_mountinfo_unescapes_paths_and_keeps_kernel_order():
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.mount_id for m in mounts] == [27, 101, 102, 103]
    assert mounts[1].mount_point == "/srv/fleet one/ws1/proc"
    assert (mounts[1].fstype, mounts[2].source) == ("proc", "tmpfs x")


@needs_root
@pytest.mark.root
def test_mounts_under_lists_deepest_first_and_not_a_sibling_with_the_same_prefix(tmp_path):
    inside, sibling = tmp_path / "tree", tmp_path / "tree-sibling"
    (inside / "a").mkdir(parents=True)
    sibling.mkdir()
    try:
        mount("tmpfs", inside / "a", "tmpfs")
        (inside / "a" / "b").mkdir()
        mount("tmpfs", inside / "a" / "b", "tmpfs")
        mount("tmpfs", sibling, "tmpfs")
        points = [m.mount_point for m in mounts_under(inside)]
        assert points == [str(inside / "a" / "b"), str(inside / "a")]
        assert sorted(points) == sorted(mounts_inside(inside))  # the same as the kernel's own list
    finally:
        for point in (inside / "a" / "b", inside / "a", sibling):
            umount(str(point))
    assert mounts_inside(tmp_path) == []


@needs_root
@pytest.mark.root
def test_umount_of_something_not_mounted_says_so_and_a_bad_mount_raises_naming_the_target(tmp_path):
    assert umount(str(tmp_path)) is False
    with pytest.raises(OSError, match=f"mount -t nosuchfs .* {tmp_path}"):
        mount("x", tmp_path, "nosuchfs")


@needs_root
@pytest.mark.root
def test_an_overlay_whose_path_holds_an_option_separator_is_not_mounted_and_says_why(tmp_path):
    """lowerdir=/a:b would be read as two lower layers, /a and b: such a path is never handed to the kernel."""
    for name in ("lower:1", "lower", "upper", "work", "target"):
        (tmp_path / name).mkdir()
    (tmp_path / "lower" / "file").write_text("from the lower layer\n")
    failure = mount_overlay(tmp_path / "target", tmp_path / "lower:1", tmp_path / "upper", tmp_path / "work")
    assert failure is not None and "separators" in str(failure)
    assert mounts_inside(tmp_path) == []
    try:
        assert mount_overlay(tmp_path / "target", tmp_path / "lower", tmp_path / "upper", tmp_path / "work") is None
        assert mounts_inside(tmp_path) == [str(tmp_path / "target")]
        assert (tmp_path / "target" / "file").read_text() == "from the lower layer\n"
    finally:
        umount(str(tmp_path / "target"))
