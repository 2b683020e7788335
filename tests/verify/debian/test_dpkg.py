"""verify/debian/dpkg.py: reading dpkg's database, with dpkg itself as the oracle.

Relation checks are compared with what real dpkg decides when it installs tiny real packages into a scratch database
(tests/support/debs.py): dpkg configures a package only when its dependencies are met. The status text parsed here is
the one dpkg wrote.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.debs import ScratchDpkg, build_deb
from verify.debian.dpkg import (
    DpkgDatabaseError,
    InstalledSet,
    Relation,
    auto_installed,
    file_list,
    native_architecture,
    parse_relations,
    parse_status,
    read_status,
)

DATA = Path(__file__).parent / "data" / "strays"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a", ((Relation("a"),),)),
        ("a (>= 1.0), b", ((Relation("a", None, ">=", "1.0"),), (Relation("b"),))),
        ("a | b:any (<< 2~) , c:i386", ((Relation("a"), Relation("b", "any", "<<", "2~")), (Relation("c", "i386"),))),
        ("python3:native (>=3.11)", ((Relation("python3", "native", ">=", "3.11"),),)),
        ("libfoo1 (>= 1:2.0+dfsg-1~bpo12+1) <!nocheck>", ((Relation("libfoo1", None, ">=", "1:2.0+dfsg-1~bpo12+1"),),)),
        ("", ()),
    ],
)
def test_parse_relations(text, expected):
    assert parse_relations(text) == expected


def test_parse_relations_names_what_it_cannot_parse():
    with pytest.raises(ValueError, match="'a \\(>= 1 2\\)'"):
        parse_relations("b, a (>= 1 2)")


def test_relation_text_round_trips():
    text = "libamdhip64-5 (>= 4.5.2) | libfoo:any"
    assert " | ".join(str(alt) for alt in parse_relations(text)[0]) == text


# Each scenario: packages installed first (dpkg must accept them), then the dependent; dpkg's verdict on the
# dependent (configured or not) is the expected answer. "i386" scenarios add i386 as a foreign architecture.
SCENARIOS = {
    "same arch": ([{"Package": "c"}], {"Depends": "c"}),
    "missing": ([{"Package": "other"}], {"Depends": "c"}),
    "version met": ([{"Package": "c", "Version": "2.0-1"}], {"Depends": "c (>= 1.5)"}),
    "version not met": ([{"Package": "c", "Version": "1.0-1"}], {"Depends": "c (>= 1.5)"}),
    "tilde below release": ([{"Package": "c", "Version": "1.5~rc1"}], {"Depends": "c (>= 1.5)"}),
    "epoch wins": ([{"Package": "c", "Version": "1:0.1"}], {"Depends": "c (>> 9.9)"}),
    "second alternative": ([{"Package": "b"}], {"Depends": "a | b"}),
    "no alternative": ([{"Package": "x"}], {"Depends": "a | b"}),
    "virtual": ([{"Package": "c", "Provides": "v"}], {"Depends": "v"}),
    "unversioned provides vs versioned dep": ([{"Package": "c", "Provides": "v"}], {"Depends": "v (>= 1)"}),
    "versioned provides": ([{"Package": "c", "Provides": "v (= 2.0)"}], {"Depends": "v (>= 1)"}),
    "versioned provides too old": ([{"Package": "c", "Provides": "v (= 0.5)"}], {"Depends": "v (>= 1)"}),
    "foreign arch, MA no": ([{"Package": "c", "Architecture": "i386"}], {"Depends": "c"}),
    "foreign arch, MA foreign": ([{"Package": "c", "Architecture": "i386", "Multi-Arch": "foreign"}], {"Depends": "c"}),
    "any, MA allowed foreign arch": (
        [{"Package": "c", "Architecture": "i386", "Multi-Arch": "allowed"}],
        {"Depends": "c:any"},
    ),
    "any, MA foreign": ([{"Package": "c", "Multi-Arch": "foreign"}], {"Depends": "c:any"}),
    "any, MA no": ([{"Package": "c"}], {"Depends": "c:any"}),
    "explicit arch": ([{"Package": "c", "Architecture": "i386"}], {"Depends": "c:i386"}),
    "explicit arch, other installed": ([{"Package": "c"}], {"Depends": "c:i386"}),
    "native qualifier (build-time only: dpkg never meets it)": ([{"Package": "c"}], {"Depends": "c:native"}),
    "arch all satisfies native": ([{"Package": "c", "Architecture": "all"}], {"Depends": "c"}),
    "arch all dependent": ([{"Package": "c"}], {"Depends": "c", "Architecture": "all"}),
    "arch all dependent, foreign candidate": (
        [{"Package": "c", "Architecture": "i386"}],
        {"Depends": "c", "Architecture": "all"},
    ),
    "foreign dependent, native candidate": ([{"Package": "c"}], {"Depends": "c", "Architecture": "i386"}),
    "foreign dependent, arch all candidate": (
        [{"Package": "c", "Architecture": "all"}],
        {"Depends": "c", "Architecture": "i386"},
    ),
    "pre-depends": ([{"Package": "c"}], {"Pre-Depends": "c"}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_satisfaction_agrees_with_dpkg(tmp_path, scenario):
    installed, dependent = SCENARIOS[scenario]
    scratch = ScratchDpkg(tmp_path, foreign_architectures=("i386",))
    for control in installed:
        done = scratch.install(build_deb(tmp_path, control))
        assert done.returncode == 0, done.stdout + done.stderr
    done = scratch.install(build_deb(tmp_path, {"Package": "dependent", **dependent}))
    dpkg_says = done.returncode == 0

    packages = parse_status(scratch.status_text)
    everything = InstalledSet(packages, native_arch="amd64")
    (package,) = everything.named("dependent")
    ours = all(
        any(everything.satisfiers(alternative, package) for alternative in group)
        for _field, groups in package.relations()
        for group in groups
    )
    assert ours == dpkg_says, f"{scenario}: dpkg said {'met' if dpkg_says else 'unmet'}:\n{done.stdout}{done.stderr}"


def test_scenarios_cover_both_verdicts(tmp_path):
    # If every scenario came out the same way, the oracle test could not tell right from wrong.
    verdicts = set()
    for name in ("same arch", "missing"):
        installed, dependent = SCENARIOS[name]
        scratch = ScratchDpkg(tmp_path / name.replace(" ", "-"))
        for control in installed:
            scratch.install(build_deb(tmp_path / name.replace(" ", "-"), control))
        verdicts.add(
            scratch.install(build_deb(tmp_path / name.replace(" ", "-"), {"Package": "d", **dependent})).returncode
        )
    assert verdicts == {0, 1}


def test_states_written_by_dpkg(tmp_path):
    scratch = ScratchDpkg(tmp_path)
    with_conffile = build_deb(
        tmp_path, {"Package": "conf"}, {"/etc/conf.conf": b"x=1\n"}, conffiles=("/etc/conf.conf",)
    )
    assert scratch.install(with_conffile, build_deb(tmp_path, {"Package": "held"})).returncode == 0
    assert scratch.dpkg("--remove", "conf").returncode == 0  # leaves its conffile: state config-files
    hold = subprocess.run(["dpkg", f"--root={scratch.root}", "--set-selections"], input="held hold\n", text=True)
    assert hold.returncode == 0
    assert scratch.install(build_deb(tmp_path, {"Package": "waiting", "Depends": "absent"})).returncode == 1

    by_name = {package.name: package for package in parse_status(scratch.status_text)}
    assert (by_name["conf"].want, by_name["conf"].state, by_name["conf"].has_files) == (
        "deinstall",
        "config-files",
        False,
    )
    assert (by_name["held"].want, by_name["held"].state, by_name["held"].has_files) == ("hold", "installed", True)
    assert (by_name["waiting"].state, by_name["waiting"].has_files) == ("unpacked", True)
    assert [package.name for package in InstalledSet(tuple(by_name.values())).packages] == ["held", "waiting"]


def test_file_list_of_multi_arch_same_and_plain_packages(tmp_path):
    scratch = ScratchDpkg(tmp_path)
    same = build_deb(tmp_path, {"Package": "libsame1", "Multi-Arch": "same"}, {"/usr/lib/x86_64-linux-gnu/a.so.1": b""})
    plain = build_deb(tmp_path, {"Package": "plain"}, {"/usr/bin/tool": b""})
    assert scratch.install(same, plain).returncode == 0
    assert (scratch.root / "var/lib/dpkg/info/libsame1:amd64.list").is_file()  # dpkg's own naming, not ours
    packages = {package.name: package for package in read_status(scratch.root)}
    assert "/usr/lib/x86_64-linux-gnu/a.so.1" in file_list(scratch.root, packages["libsame1"])
    assert "/usr/bin/tool" in file_list(scratch.root, packages["plain"])
    (scratch.root / "var/lib/dpkg/info/plain.list").unlink()
    assert file_list(scratch.root, packages["plain"]) is None


def test_real_status_paragraphs_parse(tmp_path):
    packages = {package.name: package for package in parse_status((DATA / "trixie.status").read_text())}
    ucx = packages["libucx0"]
    assert ucx.source == "ucx"  # "Source: ucx (1.18.1+ds-2)" on a binNMU
    assert ucx.version == "1.18.1+ds-2+b1"
    assert any(alt.name == "libamdhip64-5" for group in parse_relations(ucx.depends) for alt in group)
    assert packages["libamdhip64-5"].source == "rocm-hipamd"
    assert native_architecture(tuple(packages.values())) == "amd64"


def test_native_architecture_without_dpkg_paragraph():
    text = "\n\n".join(
        f"Package: p{i}\nStatus: install ok installed\nArchitecture: {arch}\nVersion: 1\n"
        for i, arch in enumerate(["arm64", "arm64", "all", "all", "all", "armhf"])
    )
    assert native_architecture(parse_status(text)) == "arm64"


def test_auto_installed_marks_from_real_apt(tmp_path):
    (tmp_path / "var/lib/apt").mkdir(parents=True)
    (tmp_path / "var/lib/apt/extended_states").write_text((DATA / "trixie.extended_states").read_text())
    marks = auto_installed(tmp_path)
    assert "libamdhip64-5:amd64" in marks
    assert "libucx0:amd64" not in marks  # installed by hand
    assert auto_installed(tmp_path / "nowhere") == frozenset()


def test_missing_database_names_the_path(tmp_path):
    with pytest.raises(DpkgDatabaseError, match=f"{tmp_path}/var/lib/dpkg/status: no dpkg status file"):
        read_status(tmp_path)


def test_garbage_database_is_refused(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("this is not\na dpkg database\n")
    with pytest.raises(DpkgDatabaseError, match="not a dpkg status file"):
        read_status(tmp_path)


def test_empty_database_is_an_empty_system(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("")
    assert read_status(tmp_path) == ()
