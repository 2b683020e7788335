"""verify/ld/loader.py against the real loader: scenarios built with gcc in each test, answered by glibc's `ldd` (and,
for dlopen, by a real process listing the loader's own object list with dl_iterate_phdr).

Each test also asserts *how* the analyser found the file, so a scenario that accidentally resolves through another
rule (and would pass for the wrong reason) fails. libtree's nine scenarios are the first nine tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.support.elfbuild import ElfBuilder, gcc_m32_available, loaded_by_program, real_ldd
from verify.ld import image as m
from verify.ld.lddview import ldd_lines
from verify.ld.platform import detect_platform
from verify.ld.process import Analyser, Dlopen


@pytest.fixture
def b(tmp_path):
    return ElfBuilder(tmp_path)


def like_ldd(path, *, env=None, cwd=None) -> m.ProcessImage:
    """Analyse `path` as `ldd path` does and require the same lines as the real ldd."""
    expected, raw = real_ldd(path, env=env, cwd=cwd)
    analyser = Analyser(cwd=str(cwd) if cwd else None)
    image = analyser.resolve(str(path), library_path=(env or {}).get("LD_LIBRARY_PATH"))
    assert ldd_lines(image) == expected, f"analyser vs real ldd for {path}:\nldd said:\n{raw.stdout}{raw.stderr}"
    return image


def request(image: m.ProcessImage, name: str, requester=None) -> m.Request:
    found = [r for r in image.requests if r.name == name and (requester is None or r.requester == str(requester))]
    assert found, f"no request for {name} in {[r.describe() for r in image.requests]}"
    return found[0]


# --- libtree's scenarios -------------------------------------------------------------------------------------------


def test_origin_in_rpath_and_runpath(b):
    b.lib("a/sub1/libx.so", soname="libx.so")
    b.lib("a/sub2/liby.so", soname="liby.so")
    top = b.lib("a/libtop.so", needed=["libx.so"], rpath="$ORIGIN/sub1")
    top2 = b.lib("a/libtop2.so", needed=["liby.so"], runpath="${ORIGIN}/sub2")
    assert request(like_ldd(top), "libx.so").found_via.kind == m.RPATH
    image = like_ldd(top2)
    assert request(image, "liby.so").found_via.kind == m.RUNPATH
    assert request(image, "liby.so").path == str(b.path("a/sub2/liby.so"))


def test_rpath_of_the_parents_parent_is_inherited(b):
    b.lib("deep/libc3.so", soname="libc3.so")
    b.lib("mid/libc2.so", soname="libc2.so", needed=["libc3.so"])  # no paths of its own
    top = b.lib("top/libc1.so", needed=["libc2.so"], rpath=f"{b.path('mid')}:{b.path('deep')}")
    image = like_ldd(top)
    deep = request(image, "libc3.so")
    assert deep.found_via.kind == m.RPATH_INHERITED and deep.found_via.owner == str(top)


def test_absolute_rpath_absolute_needed_and_no_soname(b):
    plain = b.lib("abs/libnosoname.so")  # no DT_SONAME
    b.lib("abs/librp.so", soname="librp.so")
    top = b.lib("top/libtop.so", needed=[str(plain), "librp.so"], rpath=str(b.path("abs")))
    image = like_ldd(top)
    assert request(image, str(plain)).outcome == m.LOADED
    assert image.object(str(plain)).how == m.DIRECT_PATH and image.object(str(plain)).soname is None
    assert request(image, "librp.so").found_via.kind == m.RPATH


def test_rpath_before_ld_library_path_before_runpath(b):
    for where in ("r", "l", "u"):
        b.lib(f"{where}/libpick.so", soname="libpick.so")
    env = {"LD_LIBRARY_PATH": str(b.path("l"))}
    with_rpath = b.lib("t/librpath.so", needed=["libpick.so"], rpath=str(b.path("r")))
    with_runpath = b.lib("t/librunpath.so", needed=["libpick.so"], runpath=str(b.path("u")))
    assert request(like_ldd(with_rpath, env=env), "libpick.so").path == str(b.path("r/libpick.so"))
    assert request(like_ldd(with_runpath, env=env), "libpick.so").path == str(b.path("l/libpick.so"))
    assert request(like_ldd(with_runpath), "libpick.so").path == str(b.path("u/libpick.so"))


@pytest.mark.skipif(not gcc_m32_available(), reason="gcc -m32 cannot build a 32-bit object here")
def test_32_bit_library_is_skipped_by_a_64_bit_search(b):
    b.lib("first/libbits.so", soname="libbits.so", m32=True)
    b.lib("second/libbits.so", soname="libbits.so")
    top = b.lib("t/libtop.so", needed=["libbits.so"], runpath=f"{b.path('first')}:{b.path('second')}")
    found = request(like_ldd(top), "libbits.so")
    assert found.path == str(b.path("second/libbits.so"))
    assert any("ELFCLASS32" in s for s in found.skipped)


def test_same_soname_in_two_directories_first_found_wins_and_serves_later_requests(b):
    b.lib("one/libdup.so.1", soname="libdup.so.1")
    b.lib("two/libdup.so.1", soname="libdup.so.1")
    b.lib("two/libuser.so", soname="libuser.so", needed=["libdup.so.1"], runpath="$ORIGIN")
    top = b.lib("t/libtop.so", needed=["libdup.so.1", "libuser.so"], runpath=f"{b.path('one')}:{b.path('two')}")
    image = like_ldd(top)
    later = request(image, "libdup.so.1", b.path("two/libuser.so"))
    assert later.outcome == m.ALREADY_LOADED and later.path == str(b.path("one/libdup.so.1"))


def test_origin_is_the_directory_of_the_symlink_not_its_target(b):
    b.lib("real/libdep.so", soname="libdep.so")
    b.lib("link/libdep.so", soname="libdep.so")
    b.lib("real/libviasym.so", soname="libviasym.so", needed=["libdep.so"], runpath="$ORIGIN")
    os.symlink(b.path("real/libviasym.so"), b.path("link/libviasym.so"))
    top = b.lib("t/libtop.so", needed=["libviasym.so"], runpath=str(b.path("link")))
    image = like_ldd(top)
    assert request(image, "libdep.so").path == str(b.path("link/libdep.so"))


def test_nodefaultlib_skips_the_cache_and_system_directories(b):
    top = b.lib("t/libnodef.so", needed=["libz.so.1"], nodeflib=True)
    ordinary = b.lib("t/libdef.so", needed=["libz.so.1"])
    image = like_ldd(top)
    missing = request(image, "libz.so.1")
    assert missing.outcome == m.NOT_FOUND
    assert [s.kind for s in missing.searched] == [m.LD_SO_CACHE]  # cache consulted; its system-dir entry refused
    assert request(like_ldd(ordinary), "libz.so.1").found


def test_rpath_directories_are_searched_in_order(b):
    b.lib("o2/libord.so", soname="libord.so")
    b.lib("o3/libord.so", soname="libord.so")
    top = b.lib("t/libtop.so", needed=["libord.so"], rpath=f"{b.path('o1')}:{b.path('o3')}:{b.path('o2')}")
    assert request(like_ldd(top), "libord.so").path == str(b.path("o3/libord.so"))


# --- further glibc rules ---------------------------------------------------------------------------------------------


def test_runpath_is_not_inherited_by_dependencies(b):
    b.lib("u/libleaf.so", soname="libleaf.so")
    b.lib("m/libmid.so", soname="libmid.so", needed=["libleaf.so"])
    top = b.lib("t/libtop.so", needed=["libmid.so"], runpath=f"{b.path('m')}:{b.path('u')}")
    image = like_ldd(top)
    assert request(image, "libleaf.so").outcome == m.NOT_FOUND


def test_rpath_chain_continues_through_an_object_with_runpath(b):
    """A RUNPATH object contributes no RPATH (glibc drops its DT_RPATH), but its own loader's RPATH still applies to
    a RUNPATH-less grandchild; the RUNPATH object's own lookups use no RPATH at all."""
    b.lib("q/libq.so", soname="libq.so")
    b.lib("n/libn.so", soname="libn.so", needed=["libq.so"])  # no paths: inherits the chain
    b.lib("r/libr.so", soname="libr.so", needed=["libn.so", "libq.so"], runpath=str(b.path("n")))
    top = b.lib("t/libtop.so", needed=["libr.so"], rpath=f"{b.path('r')}:{b.path('q')}")
    image = like_ldd(top)
    by_runpath_object = request(image, "libq.so", b.path("r/libr.so"))
    assert (
        by_runpath_object.outcome == m.NOT_FOUND
        or by_runpath_object.found_via is None
        or by_runpath_object.found_via.kind not in (m.RPATH, m.RPATH_INHERITED)
    )
    grandchild = [r for r in image.requests if r.name == "libq.so" and r.requester == str(b.path("n/libn.so"))]
    first = request(image, "libq.so")
    assert first.requester == str(b.path("r/libr.so")) and first.outcome == m.NOT_FOUND
    assert grandchild[0].outcome == m.LOADED and grandchild[0].found_via.kind == m.RPATH_INHERITED
    assert grandchild[0].found_via.owner == str(top)


def test_already_loaded_by_file_identity_under_another_name(b):
    b.lib("s/libsame.so.1", soname="libsame.so.1")
    os.symlink("libsame.so.1", b.path("s/libsame.so"))
    top = b.lib("t/libtop.so", needed=["libsame.so", "libsame.so.1"], runpath=str(b.path("s")))
    image = like_ldd(top)
    assert request(image, "libsame.so.1").outcome == m.ALREADY_LOADED


def test_glibc_hwcaps_subdirectory_is_preferred_for_a_supported_level(b):
    platform = detect_platform()
    if not platform.hwcaps:
        pytest.skip("this CPU supports no x86-64-v2+ level: nothing to prefer")
    level = platform.hwcaps[-1]  # the lowest supported level: any supported level beats the plain directory
    b.lib("h/libhw.so", soname="libhw.so")
    b.lib(f"h/glibc-hwcaps/{level}/libhw.so", soname="libhw.so")
    b.lib("h/glibc-hwcaps/x86-64-v9/libhw.so", soname="libhw.so")  # a level no CPU has
    top = b.lib("t/libtop.so", needed=["libhw.so"], runpath=str(b.path("h")))
    found = request(like_ldd(top), "libhw.so")
    assert found.path == str(b.path(f"h/glibc-hwcaps/{level}/libhw.so"))


def test_legacy_hwcap_subdirectory_up_to_glibc_2_36(b):
    platform = detect_platform()
    b.lib("g/libleg.so", soname="libleg.so")
    b.lib("g/tls/libleg.so", soname="libleg.so")
    top = b.lib("t/libtop.so", needed=["libleg.so"], runpath=str(b.path("g")))
    found = request(like_ldd(top), "libleg.so")
    assert found.path == str(b.path("g/tls/libleg.so" if platform.legacy_subdirs else "g/libleg.so"))


def test_lib_and_platform_tokens(b):
    platform = detect_platform()
    b.lib(f"base/{platform.lib}/liblt.so", soname="liblt.so")
    b.lib(f"base/{platform.platform}/libpt.so", soname="libpt.so")
    top = b.lib(
        "t/libtop.so", needed=["liblt.so", "libpt.so"], runpath=f"{b.path('base')}/$LIB:{b.path('base')}/${{PLATFORM}}"
    )
    image = like_ldd(top)
    assert request(image, "liblt.so").found and request(image, "libpt.so").found


def test_empty_path_element_means_the_working_directory(b, tmp_path):
    work = tmp_path / "work"
    b.lib("work/libcwd.so", soname="libcwd.so")
    top = b.lib("t/libtop.so", needed=["libcwd.so"], runpath=f":{b.path('nowhere')}")
    found = request(like_ldd(top, cwd=work), "libcwd.so")
    assert found.found_via.kind == m.RUNPATH and found.path == "libcwd.so"
    assert request(like_ldd(top, cwd=tmp_path), "libcwd.so").outcome == m.NOT_FOUND


def test_empty_ld_library_path_elements_and_semicolon_separator(b, tmp_path):
    b.lib("work/libenv.so", soname="libenv.so")
    b.lib("semi/libsemi.so", soname="libsemi.so")
    top = b.lib("t/libtop.so", needed=["libenv.so", "libsemi.so"])
    image = like_ldd(top, env={"LD_LIBRARY_PATH": f"{b.path('x')};{b.path('semi')}::"}, cwd=tmp_path / "work")
    assert request(image, "libenv.so").found_via.kind == m.LD_LIBRARY_PATH


def test_needed_with_a_slash(b, tmp_path):
    b.lib("t/sub/liborig.so", soname="liborig.so")
    b.lib("rel/librel.so", soname="librel.so")
    b.lib("abs/libabs.so")
    top = b.lib("t/libtop.so", needed=["$ORIGIN/sub/liborig.so", "rel/librel.so", str(b.path("abs/libabs.so"))])
    image = like_ldd(top, cwd=tmp_path)
    expanded = f"{b.path('t')}/sub/liborig.so"  # dl-deps.c expands DSTs in DT_NEEDED before the lookup
    assert request(image, expanded).outcome == m.LOADED and image.object(expanded).how == m.DIRECT_PATH
    assert request(image, "rel/librel.so").path == "rel/librel.so"
    assert image.object(str(b.path("abs/libabs.so"))).how == m.DIRECT_PATH


def test_duplicate_directories_in_one_list_are_searched_once(b):
    b.lib("d/libdd.so", soname="libdd.so")
    top = b.lib("t/libtop.so", needed=["libdd.so"], runpath=f"{b.path('d')}:{b.path('d')}/:{b.path('d')}")
    found = request(like_ldd(top), "libdd.so")
    assert found.found_via.dirs == (str(b.path("d")),)


def test_a_file_that_is_not_elf_in_the_search_path_stops_the_load(b):
    (b.path("bad")).mkdir()
    b.path("bad/libbroken.so").write_bytes(b"#!/bin/sh\n" + b"x" * 100)
    b.lib("good/libbroken.so", soname="libbroken.so")
    top = b.lib("t/libtop.so", needed=["libbroken.so"], runpath=f"{b.path('bad')}:{b.path('good')}")
    expected, raw = real_ldd(top)
    assert raw.returncode != 0 and "invalid ELF header" in raw.stdout + raw.stderr  # ldd merges the two
    image = Analyser().resolve(str(top))
    broken = request(image, "libbroken.so")
    assert broken.outcome == m.ERROR and "invalid ELF header" in broken.error
    assert str(b.path("bad/libbroken.so")) in broken.error
    assert image.findings and image.findings[0].path == str(b.path("bad/libbroken.so"))


def test_missing_names_are_listed_each_time_they_are_asked_for(b):
    b.lib("p/libp.so", soname="libp.so", needed=["libabsent.so"])
    top = b.lib("t/libtop.so", needed=["libabsent.so", "libp.so"], runpath=str(b.path("p")))
    image = like_ldd(top)
    assert len([r for r in image.requests if r.name == "libabsent.so" and r.outcome == m.NOT_FOUND]) == 2


def test_interpreter_sits_where_breadth_first_loading_reaches_it(b):
    top = b.lib("t/libtop.so", needed=["libmissing.so", "ld-linux-x86-64.so.2"])
    image = like_ldd(top)
    assert image.objects[1].how == m.INTERPRETER


def test_the_executables_rpath_applies_to_lookups_of_objects_without_paths(b):
    b.lib("e/libexe.so", soname="libexe.so")
    b.lib("m/libm1.so", soname="libm1.so", needed=["libexe.so"])
    prog = b.exe("bin/prog", needed=["libm1.so"], rpath=f"{b.path('m')}:{b.path('e')}")
    image = like_ldd(prog)
    assert request(image, "libexe.so").found_via.kind == m.RPATH_INHERITED


# --- dlopen, against a real process -----------------------------------------------------------------------------------


def model_objects(image: m.ProcessImage) -> list[str]:
    return [o.path for o in image.objects if o.how != m.MAIN_PROGRAM]


def test_dlopen_binds_a_later_library_to_an_already_loaded_soname(b):
    """Like bitsandbytes' libhipblas.so.3 bound to the torch ROCm wheel's libhipblas.so (whose SONAME is
    libhipblas.so.3): the second library's RUNPATH is never searched."""
    b.lib("torchlib/libhip-like.so", soname="libhip-like.so.3")
    b.lib("sys/libhip-like.so.3", soname="libhip-like.so.3")
    first = b.lib("torchlib/libfirst.so", soname="libfirst.so", needed=["libhip-like.so"], runpath="$ORIGIN")
    second = b.lib("bnb/libsecond.so", soname="libsecond.so", needed=["libhip-like.so.3"], runpath=str(b.path("sys")))
    prog = b.dlopen_program("bin/opener")
    objects, errors, stderr = loaded_by_program(prog, [str(first), str(second)])
    assert not errors, stderr
    image = Analyser().resolve_process(str(prog), [str(first), str(second)])
    assert model_objects(image) == objects
    bound = request(image, "libhip-like.so.3", second)
    assert bound.outcome == m.ALREADY_LOADED and bound.matched_by == m.BY_SONAME
    assert bound.path == str(b.path("torchlib/libhip-like.so"))
    alone = Analyser().resolve(str(second))  # the per-file view (ldd) finds the other copy
    assert request(alone, "libhip-like.so.3").path == str(b.path("sys/libhip-like.so.3"))


def test_dlopen_by_bare_name_searches_the_callers_paths_but_starts_a_new_chain(b):
    """glibc's __RTLD_CALLMAP: the caller's RPATH finds the library, but the library's own dependencies do not
    inherit the caller's RPATH (l_loader is NULL), so its dependency is not found."""
    b.lib("x/libdepx.so", soname="libdepx.so")
    b.lib("y/libbyname.so", soname="libbyname.so", needed=["libdepx.so"])
    b.lib("z/libfine.so", soname="libfine.so")
    prog = b.dlopen_program(
        "bin/opener", caller_library="c/libcaller.so", rpath=f"{b.path('x')}:{b.path('y')}:{b.path('z')}"
    )
    objects, errors, stderr = loaded_by_program(prog, ["lib:libfine.so", "lib:libbyname.so"])
    assert errors == ["libdepx.so: cannot open shared object file: No such file or directory"], stderr
    caller = str(b.path("c/libcaller.so"))
    image = Analyser().resolve_process(str(prog), [Dlopen("libfine.so", caller), Dlopen("libbyname.so", caller)])
    assert request(image, "libfine.so").found_via.kind == m.RPATH
    assert request(image, "libbyname.so").found_via.kind == m.RPATH
    assert request(image, "libdepx.so").outcome == m.NOT_FOUND
    # The real dlopen failed and unloaded libbyname.so; the model keeps it (as ldd's trace mode would).
    assert model_objects(image)[: len(objects)] == objects


def test_dlopen_of_a_path_then_of_its_soname_maps_nothing_new(b):
    lib = b.lib("d/libonce.so.2", soname="libonce.so.2")
    prog = b.dlopen_program("bin/opener")
    objects, errors, stderr = loaded_by_program(prog, [str(lib), "libonce.so.2"])
    assert not errors, stderr
    image = Analyser().resolve_process(str(prog), [str(lib), "libonce.so.2"])
    assert model_objects(image) == objects
    assert request(image, "libonce.so.2").matched_by == m.BY_SONAME


# --- ld.so.cache, with a cache built by ldconfig, and the real loader reading it in a private mount namespace --------


def ldd_with_cache(cache, path) -> tuple[list[str], str]:
    """Real ldd while /etc/ld.so.cache is `cache` (bind-mounted in a private mount namespace that dies with it)."""
    import subprocess

    from verify.ld.lddview import parse_ldd_output

    script = 'mount --bind "$0" /etc/ld.so.cache && exec ldd "$1"'
    result = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(cache), str(path)],
        capture_output=True,
        text=True,
    )
    return parse_ldd_output(result.stdout), result.stdout + result.stderr


def build_cache(b: ElfBuilder, dirs: list[str]):
    import subprocess

    conf = b.path("ld.so.conf")
    conf.write_text("".join(f"{d}\n" for d in dirs))
    cache = b.path("ld.so.cache")
    subprocess.run(["ldconfig", "-X", "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    return cache


root_and_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare to show the loader a test cache"
)


@pytest.mark.root
@root_and_unshare
def test_cache_prefers_the_best_hwcaps_entry_and_honours_nodeflib_only_for_system_dirs(b):
    platform = detect_platform()
    b.lib("c/libcached.so.1", soname="libcached.so.1")
    for level in platform.hwcaps:
        b.lib(f"c/glibc-hwcaps/{level}/libcached.so.1", soname="libcached.so.1")
    cache = build_cache(b, [str(b.path("c"))])
    nodef = b.lib("t/libnodef.so", needed=["libcached.so.1", "libz.so.1"], nodeflib=True)
    expected, raw = ldd_with_cache(cache, nodef)
    image = Analyser(cache_path=str(cache)).resolve(str(nodef))
    assert ldd_lines(image) == expected, raw
    found = request(image, "libcached.so.1")
    assert found.found_via.kind == m.LD_SO_CACHE  # nodeflib refuses only cache entries under the system dirs
    best = platform.hwcaps[0] if platform.hwcaps else None
    assert found.path == str(b.path(f"c/glibc-hwcaps/{best}/libcached.so.1" if best else "c/libcached.so.1"))
    assert request(image, "libz.so.1").outcome == m.NOT_FOUND


@pytest.mark.root
@root_and_unshare
def test_stale_or_wrong_class_cache_entry_falls_through(b):
    b.lib("c/libstale.so.1", soname="libstale.so.1")
    if gcc_m32_available():
        b.lib("c/libwrong.so.1", soname="libwrong.so.1")
    cache = build_cache(b, [str(b.path("c"))])
    b.path("c/libstale.so.1").unlink()  # the cache still points at it
    if gcc_m32_available():
        b.lib("c/libwrong.so.1", soname="libwrong.so.1", m32=True)
    top = b.lib("t/libtop.so", needed=["libstale.so.1", "libwrong.so.1"])
    expected, raw = ldd_with_cache(cache, top)
    image = Analyser(cache_path=str(cache)).resolve(str(top))
    assert ldd_lines(image) == expected, raw
    stale = request(image, "libstale.so.1")
    assert stale.outcome == m.NOT_FOUND and [s.kind for s in stale.searched] == [m.LD_SO_CACHE, m.SYSTEM_DIRS]
    assert str(b.path("c/libstale.so.1")) in stale.searched[0].dirs
