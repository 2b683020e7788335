"""verify/debian/strays.py and `python -m verify strays`: which distro ROCm packages are installed, what needs them,
and which ship a SONAME a ROCm 7.2 consumer could bind to.

Three kinds of evidence:
- real dpkg status paragraphs of the real packages, taken from real installs (data/strays/, see extract.py);
- packages installed by real dpkg into a scratch database, carrying gcc-built libraries with the real SONAMEs;
- (slow, root) real Debian 12 and 13 roots where apt pulled the distro ROCm packages in (tests/support/debian_roots.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.support.debs import ScratchDpkg, build_deb
from tests.support.elfbuild import ElfBuilder
from verify.commands.strays import format_text
from verify.debian.strays import StraysReport, find_strays

DATA = Path(__file__).parent / "data" / "strays"
SCHEMA = json.loads((Path(__file__).parents[3] / "verify" / "debian" / "strays_schema.json").read_text())
REPO = Path(__file__).parents[3]
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def fixture_root(tmp_path: Path, name: str) -> Path:
    """A root holding only the real status paragraphs and apt marks captured from a real install (no files)."""
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/apt").mkdir(parents=True)
    shutil.copy(DATA / f"{name}.status", tmp_path / "var/lib/dpkg/status")
    shutil.copy(DATA / f"{name}.extended_states", tmp_path / "var/lib/apt/extended_states")
    return tmp_path


def by_name(report: StraysReport) -> dict:
    return {stray.package: stray for stray in report.strays}


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify", "strays", *argv], capture_output=True, text=True, cwd=REPO)


# --- real status paragraphs -------------------------------------------------------------------------------------------


def test_debian12_slurm_and_rocsparse_attributed(tmp_path):
    report = find_strays(fixture_root(tmp_path, "bookworm"))
    strays = by_name(report)
    assert set(strays) == {
        "libamd-comgr2",
        "libamdhip64-5",
        "libhsa-runtime64-1",
        "libhsakmt1",
        "librocm-smi-dev",
        "librocm-smi64-1",
        "librocsparse0",
    }
    smi = strays["librocm-smi64-1"]
    assert smi.version == "5.2.3-2" and smi.source == "rocm-smi-lib" and smi.auto_installed
    assert "slurm-wlm-rsmi-plugin" in smi.needed_by
    assert "slurm-wlm-rsmi-plugin" in smi.pulled_in_by
    hip = strays["libamdhip64-5"]
    assert hip.needed_by == ("librocsparse0",)
    assert [d.relation for d in hip.dependents] == ["libamdhip64-5 (>= 4.5.2)"]
    # librocsparse0 was installed by hand and nothing needs it: it is the top of the HIP chain.
    rocsparse = strays["librocsparse0"]
    assert rocsparse.needed_by == () and not rocsparse.auto_installed
    assert strays["libhsa-runtime64-1"].needed_by == ("libamdhip64-5",)
    assert strays["libhsa-runtime64-1"].pulled_in_by == ("librocsparse0",)
    # No files in this root: the report says it could not look at libraries rather than claiming there are none.
    assert all(stray.file_list_missing and not stray.libraries for stray in report.strays)
    assert "slurm-wlm-basic-plugins" not in strays and "slurm-wlm-rsmi-plugin" not in strays


def test_debian13_libucx0_pulls_hip_57_as_on_ubuntu_noble(tmp_path):
    strays = by_name(find_strays(fixture_root(tmp_path, "trixie")))
    assert set(strays) == {"libamd-comgr2", "libamdhip64-5", "libhsa-runtime64-1", "libhsakmt1"}
    hip = strays["libamdhip64-5"]
    assert hip.version == "5.7.1-6+deb13u1"
    assert hip.needed_by == ("libucx0",) and hip.pulled_in_by == ("libucx0",)
    assert hip.describe().startswith("libamdhip64-5 5.7.1-6+deb13u1 (amd64, source rocm-hipamd), needed by libucx0")
    # libucx0 depends on libhsa-runtime64-1 directly too; libhsakmt1 only through the chain.
    assert set(strays["libhsa-runtime64-1"].needed_by) == {"libamdhip64-5", "libucx0"}
    assert strays["libhsakmt1"].pulled_in_by == ("libucx0",)


def test_json_round_trips_and_matches_the_schema(tmp_path):
    report = find_strays(fixture_root(tmp_path, "bookworm"))
    data = report.to_json()
    jsonschema.validate(data, SCHEMA)
    assert StraysReport.from_json(json.loads(json.dumps(data))) == report


def test_schema_refuses_a_report_missing_a_field(tmp_path):
    data = find_strays(fixture_root(tmp_path, "trixie")).to_json()
    del data["strays"][0]["needed_by"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


# --- real dpkg, gcc-built libraries -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch_system(tmp_path_factory):
    """A dpkg database filled by real dpkg with packages shaped like the real ones (control fields copied from the
    real paragraphs), whose libraries carry the real SONAMEs, plus the cases around them."""
    work = tmp_path_factory.mktemp("strays")
    elf = ElfBuilder(work / "elf")
    hsa = elf.lib("hsa/libhsa-runtime64.so.1.5.0", soname="libhsa-runtime64.so.1")
    hip = elf.lib("hip/libamdhip64.so.5.7.31921", soname="libamdhip64.so.5")
    smi = elf.lib("smi/librocm_smi64.so.1.0", soname="librocm_smi64.so.1")
    scratch = ScratchDpkg(work)
    debs = [
        build_deb(
            work,
            {
                "Package": "libhsa-runtime64-1",
                "Source": "rocr-runtime",
                "Version": "6.1.2-3",
                "Maintainer": "Debian ROCm Team <debian-ai@lists.debian.org>",
                "Provides": "hsa-runtime",
            },
            {f"{LIBDIR}/libhsa-runtime64.so.1.5.0": hsa},
            links={f"{LIBDIR}/libhsa-runtime64.so.1": "libhsa-runtime64.so.1.5.0"},
        ),
        build_deb(
            work,
            {
                "Package": "libamdhip64-5",
                "Source": "rocm-hipamd",
                "Version": "5.7.1-6+deb13u1",
                "Depends": "libhsa-runtime64-1 (>= 5.7.1)",
            },
            {f"{LIBDIR}/libamdhip64.so.5.7.31921": hip},
            links={f"{LIBDIR}/libamdhip64.so.5": "libamdhip64.so.5.7.31921"},
        ),
        build_deb(
            work,
            {
                "Package": "libucx0",
                "Source": "ucx (1.18.1+ds-2)",
                "Version": "1.18.1+ds-2+b1",
                "Depends": "libamdhip64-5 (>= 4.5.2), libhsa-runtime64-1 (>= 5.7.1)",
            },
        ),
        build_deb(
            work,
            {
                "Package": "librocm-smi64-1",
                "Source": "rocm-smi-lib",
                "Version": "5.2.3-2",
                "Maintainer": "ROCm Team <debian-ai@lists.debian.org>",
            },
            {"/usr/lib/librocm_smi64.so.1.0": smi, f"{LIBDIR}/libbroken.so.1": b"not an ELF file"},
            links={"/usr/lib/librocm_smi64.so.1": "librocm_smi64.so.1.0"},
        ),
        # Needs the SMI library, or an alternative that is installed too: it does not *need* the stray.
        build_deb(work, {"Package": "smi-user", "Depends": "librocm-smi64-1 | smi-shim"}),
        build_deb(work, {"Package": "smi-shim"}),
        # Reaches the HSA runtime through a virtual package it provides.
        build_deb(work, {"Package": "hsa-tool", "Depends": "hsa-runtime"}),
        # Ubuntu's rocminfo (no Source field: source == name) is a stray; AMD's rocminfo never is.
        build_deb(
            work,
            {
                "Package": "rocminfo",
                "Version": "5.7.1-3build1",
                "Maintainer": "Ubuntu Developers <ubuntu-devel-discuss@lists.ubuntu.com>",
                "Original-Maintainer": "Debian ROCm Team <debian-ai@lists.debian.org>",
            },
        ),
        build_deb(
            work,
            {
                "Package": "hipcc",
                "Version": "1.1.1.70204-93~24.04",
                "Maintainer": "ROCm Dev Support <rocm-dev.support@amd.com>",
            },
        ),
        build_deb(
            work,
            {
                "Package": "rocblas",
                "Version": "5.2.0.70204-93~24.04",
                "Maintainer": "ROCm Dev Support <rocm-dev.support@amd.com>",
            },
        ),
        # Same maintainer list as ROCm, not ROCm: never a stray.
        build_deb(
            work,
            {
                "Package": "libonnx1",
                "Source": "onnx",
                "Maintainer": "Debian Deep Learning Team <debian-ai@lists.debian.org>",
            },
        ),
        # Removed with its conffile left behind (state config-files): no files, not a stray.
        build_deb(
            work,
            {"Package": "rocm-smi", "Source": "rocm-smi-lib"},
            {"/etc/rocm-smi.conf": b"x\n"},
            conffiles=("/etc/rocm-smi.conf",),
        ),
        build_deb(work, {"Package": "librocrand1", "Source": "rocrand", "Version": "5.7.1-6"}),
    ]
    done = scratch.install(*debs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert scratch.dpkg("--remove", "rocm-smi").returncode == 0
    held = subprocess.run(["dpkg", f"--root={scratch.root}", "--set-selections"], input="librocrand1 hold\n", text=True)
    assert held.returncode == 0
    return scratch.root


def test_scratch_strays_are_exactly_the_distro_rocm_ones(scratch_system):
    assert set(by_name(find_strays(scratch_system))) == {
        "libhsa-runtime64-1",
        "libamdhip64-5",
        "librocm-smi64-1",
        "rocminfo",
        "librocrand1",
    }


def test_sonames_come_from_the_elf_headers(scratch_system):
    strays = by_name(find_strays(scratch_system))
    hsa = strays["libhsa-runtime64-1"]
    assert [(lib.path, lib.soname, lib.rocm_7_2_soname) for lib in hsa.libraries] == [
        (f"{LIBDIR}/libhsa-runtime64.so.1.5.0", "libhsa-runtime64.so.1", True)
    ]
    assert hsa.rocm_7_2_sonames == ("libhsa-runtime64.so.1",)
    hip = strays["libamdhip64-5"]
    assert [lib.soname for lib in hip.libraries] == ["libamdhip64.so.5"]
    assert hip.rocm_7_2_sonames == ()  # ROCm 7.2's HIP is libamdhip64.so.7: no binding by name
    smi = strays["librocm-smi64-1"]
    libraries = {lib.path: lib for lib in smi.libraries}
    assert libraries["/usr/lib/librocm_smi64.so.1.0"].soname == "librocm_smi64.so.1"
    assert libraries[f"{LIBDIR}/libbroken.so.1"].soname is None
    assert "not an ELF file" in libraries[f"{LIBDIR}/libbroken.so.1"].error


def test_dependents_alternatives_and_virtual_packages(scratch_system):
    strays = by_name(find_strays(scratch_system))
    hsa = strays["libhsa-runtime64-1"]
    assert set(hsa.needed_by) == {"libamdhip64-5", "libucx0", "hsa-tool"}  # hsa-tool through Provides: hsa-runtime
    smi = strays["librocm-smi64-1"]
    (dependent,) = smi.dependents
    assert (dependent.package, dependent.relation, dependent.alternatives) == (
        "smi-user",
        "librocm-smi64-1 | smi-shim",
        ("smi-shim:amd64",),
    )
    assert smi.needed_by == () and not dependent.needs_it
    assert strays["libamdhip64-5"].pulled_in_by == ("libucx0",)
    assert set(hsa.pulled_in_by) == {"libucx0", "hsa-tool"}


def test_libraries_behind_an_absolute_directory_symlink_of_the_image(tmp_path):
    # Images are not merged-/usr alike: here /lib -> /usr/lib is an *absolute* link, which must resolve inside the
    # image (on this machine it would lead to the controller's own /usr/lib, where the file is not).
    root = tmp_path / "image"
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib").symlink_to("/usr/lib")
    ElfBuilder(tmp_path / "elf").lib(
        "../image/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1.5.0", soname="libhsa-runtime64.so.1"
    )
    (root / "var/lib/dpkg/status").write_text(
        "Package: libhsa-runtime64-1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 5.2.3-3\n"
        "Source: rocr-runtime\n"
    )
    (root / "var/lib/dpkg/info/libhsa-runtime64-1:amd64.list").write_text(
        "/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libhsa-runtime64.so.1.5.0\n"
    )
    (stray,) = find_strays(root).strays
    assert [(lib.path, lib.soname) for lib in stray.libraries] == [
        ("/lib/x86_64-linux-gnu/libhsa-runtime64.so.1.5.0", "libhsa-runtime64.so.1")
    ]


def test_states_and_selections(scratch_system):
    strays = by_name(find_strays(scratch_system))
    assert strays["librocrand1"].want == "hold"
    assert "rocm-smi" not in strays  # config-files only


def test_text_output_names_what_matters(scratch_system):
    text = format_text(find_strays(scratch_system))
    assert text.startswith("5 distro-archive ROCm package(s) installed under ")
    assert "libamdhip64-5 5.7.1-6+deb13u1 (amd64, source rocm-hipamd), needed by libucx0" in text
    assert f"{LIBDIR}/libhsa-runtime64.so.1.5.0: libhsa-runtime64.so.1  <- ROCm 7.2 SONAME" in text
    assert "Depends of smi-user: librocm-smi64-1 | smi-shim (could use smi-shim:amd64 instead)" in text
    assert "libbroken.so.1: no SONAME (not an ELF file" in text
    assert "could bind to libhsa-runtime64.so.1, librocm_smi64.so.1" in text


def test_cli_exit_codes(scratch_system, tmp_path):
    found = run_cli("--root", str(scratch_system), "--json")
    assert found.returncode == 1, found.stderr
    jsonschema.validate(json.loads(found.stdout), SCHEMA)

    clean = ScratchDpkg(tmp_path / "clean")
    assert clean.install(build_deb(tmp_path, {"Package": "hello"})).returncode == 0
    none = run_cli("--root", str(clean.root))
    assert (none.returncode, none.stdout) == (0, f"No distro-archive ROCm packages installed under {clean.root}.\n")

    missing = run_cli("--root", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"strays: {tmp_path}/nowhere/var/lib/dpkg/status: no dpkg status file — is {tmp_path}/nowhere the root of a "
        "Debian/Ubuntu system?"
    )


# --- real Debian roots, packages pulled in by apt ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize(
    "suite, packages, expected",
    [
        (
            "bookworm",
            ("slurm-wlm-rsmi-plugin", "librocsparse0"),
            {
                "librocm-smi64-1": ("slurm-wlm-rsmi-plugin", ("librocm_smi64.so.1",)),
                "libhsa-runtime64-1": ("libamdhip64-5", ("libhsa-runtime64.so.1",)),
                "libamdhip64-5": ("librocsparse0", ()),
            },
        ),
        (
            "trixie",
            ("libucx0",),
            {
                "libamdhip64-5": ("libucx0", ()),
                "libhsa-runtime64-1": ("libucx0", ("libhsa-runtime64.so.1",)),
            },
        ),
    ],
)
def test_real_roots(suite, packages, expected):
    from tests.support.debian_roots import image

    root = image(suite, packages)
    done = run_cli("--root", str(root), "--json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, SCHEMA)
    strays = by_name(StraysReport.from_json(data))
    for package, (needer, sonames) in expected.items():
        assert needer in strays[package].needed_by, strays[package].describe()
        assert strays[package].rocm_7_2_sonames == sonames, strays[package].libraries
        assert not strays[package].file_list_missing and strays[package].libraries
    # Every SONAME reported was read from a real file that the loader would see under that name.
    for stray in strays.values():
        for library in stray.libraries:
            assert library.error is None, library
            assert (root / library.path.lstrip("/")).is_file()
