"""`--root DIR`: analysing a filesystem image (verify/ld/fsview.py and the resolver on top of it).

The image is made here from this machine's own libc, loader and zlib plus gcc-built files, laid out like Debian
(absolute symlinks included, whose targets exist only inside the image), with an ld.so.cache that `ldconfig -r` builds
for it. The oracle is the real loader *inside* the image: `chroot IMAGE ld.so` in trace mode (what ldd runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.elfbuild import ElfBuilder
from verify.ld import image as m
from verify.ld.fsview import FileSystemView
from verify.ld.lddview import ldd_lines, parse_ldd_output
from verify.ld.process import Analyser

MULTIARCH = "usr/lib/x86_64-linux-gnu"


def make_image(top) -> tuple[ElfBuilder, str]:
    b = ElfBuilder(top)
    image = top / "image"
    lib = image / MULTIARCH
    lib.mkdir(parents=True)
    for name in ("libc.so.6", "libz.so.1", "ld-linux-x86-64.so.2"):
        shutil.copy2(os.path.realpath(f"/lib/x86_64-linux-gnu/{name}"), lib / name)
    os.symlink("usr/lib", image / "lib")
    (image / "lib64").mkdir()
    os.symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", image / "lib64/ld-linux-x86-64.so.2")  # as Debian has it
    b.lib("image/opt/vendor-7.0/lib/libvendor.so.1", soname="libvendor.so.1")
    (image / "opt/vendor").mkdir()
    os.symlink("/opt/vendor-7.0/lib", image / "opt/vendor/lib")  # absolute: only the image has /opt/vendor-7.0
    b.lib("image/usr/lib/app/libapp.so", soname="libapp.so", needed=["libvendor.so.1"])
    b.exe("image/usr/bin/prog", needed=["libz.so.1", "libapp.so"], runpath="$ORIGIN/../lib/app")
    (image / "etc/ld.so.conf.d").mkdir(parents=True)
    (image / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (image / "etc/ld.so.conf.d/vendor.conf").write_text("/opt/vendor/lib\n")
    return b, str(image)


def test_symlinks_resolve_inside_the_image(tmp_path):
    _, image = make_image(tmp_path)
    fs = FileSystemView(image)
    assert fs.host_path("/lib64/ld-linux-x86-64.so.2") == f"{image}/{MULTIARCH}/ld-linux-x86-64.so.2"
    assert fs.host_path("/opt/vendor/lib/libvendor.so.1") == f"{image}/opt/vendor-7.0/lib/libvendor.so.1"
    assert fs.host_path("/../../../etc/passwd") == f"{image}/etc/passwd"  # '..' never climbs out
    os.symlink("loop-b", os.path.join(image, "loop-a"))
    os.symlink("loop-a", os.path.join(image, "loop-b"))
    assert fs.host_path("/loop-a/x") is None
    assert fs.listing("/opt/vendor/lib") == frozenset({"libvendor.so.1"})


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_image_analysis_equals_the_loader_running_inside_the_image(tmp_path):
    _, image = make_image(tmp_path)
    subprocess.run(["ldconfig", "-X", "-r", image], check=True, capture_output=True)
    # `ld.so --list` is what ldd runs; the environment variable would make the host loader trace chroot itself.
    traced = subprocess.run(
        [shutil.which("chroot") or "/usr/sbin/chroot", image, "/lib64/ld-linux-x86-64.so.2", "--list", "/usr/bin/prog"],
        capture_output=True,
        text=True,
    )
    expected = parse_ldd_output(traced.stdout)
    assert traced.returncode == 0 and expected, traced.stdout + traced.stderr
    result = Analyser(image).resolve("/usr/bin/prog")
    assert ldd_lines(result) == expected
    vendor = result.object_named("libvendor.so.1")
    assert vendor.path == "/opt/vendor/lib/libvendor.so.1" and vendor.how == m.LD_SO_CACHE  # image paths, not DIR/…
    assert all(not o.path.startswith(image) for o in result.objects)


def test_without_a_cache_the_ld_so_conf_directories_stand_in_and_say_so(tmp_path):
    _, image = make_image(tmp_path)
    result = Analyser(image).resolve("/usr/bin/prog")
    vendor = result.object_named("libvendor.so.1")
    assert vendor.how == m.LD_SO_CONF and vendor.path == "/opt/vendor/lib/libvendor.so.1"
    assert result.object_named("libz.so.1").how == m.SYSTEM_DIRS
    assert result.object_named("libz.so.1").path == "/lib/x86_64-linux-gnu/libz.so.1"


def test_a_library_missing_from_the_image_is_not_found_even_if_the_host_has_it(tmp_path):
    b, image = make_image(tmp_path)
    b.exe("image/usr/bin/needs-host-lib", needed=["libexpat.so.1"])  # present on this machine, absent in the image
    assert os.path.exists("/lib/x86_64-linux-gnu/libexpat.so.1")
    result = Analyser(image).resolve("/usr/bin/needs-host-lib")
    assert [r.outcome for r in result.requests_for("libexpat.so.1")] == [m.NOT_FOUND]


def test_paths_inside_an_image_follow_absolute_links_inside_it(tmp_path: Path):
    (tmp_path / "opt" / "rocm-7.2.4" / "lib").mkdir(parents=True)
    (tmp_path / "etc" / "alternatives").mkdir(parents=True)
    (tmp_path / "etc" / "alternatives" / "rocm").symlink_to("/opt/rocm-7.2.4")
    (tmp_path / "opt" / "rocm").symlink_to("/etc/alternatives/rocm")
    view = FileSystemView(str(tmp_path))
    assert view.real_path("/opt/rocm/lib") == "/opt/rocm-7.2.4/lib"
    assert view.local("/opt/rocm/lib") == tmp_path / "opt" / "rocm-7.2.4" / "lib"
    assert view.image_path(view.local("/opt/rocm/lib")) == "/opt/rocm-7.2.4/lib"
