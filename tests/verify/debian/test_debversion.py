"""verify/debian/debversion.py against dpkg itself (`dpkg --compare-versions`) as the oracle."""

from __future__ import annotations

import itertools
import subprocess

import pytest

from verify.debian.debversion import compare_versions, satisfies

# Tricky shapes (epochs, tildes, letters vs. symbols, leading zeros, missing revisions, '+' and '.' runs) and the real
# versions this project meets: distro ROCm (Debian, Ubuntu) and AMD's (build number inside the version).
VERSIONS = [
    "0",
    "1",
    "1.0",
    "1.0-1",
    "1.0-0",
    "1:0.9",
    "2:0",
    "1.0~rc1",
    "1.0~~",
    "1.0~",
    "1.0+",
    "1.0a",
    "1.0.",
    "1.0-1~bpo1",
    "1.00",
    "01.0",
    "1.0-1+b1",
    "1.0-1build1",
    "1.0-1ubuntu1",
    "a",
    "A",
    "1.0+dfsg-1",
    "1.0.0",
    "1..0",
    "5.7.1-3",
    "5.7.1-3build1",
    "5.7.1-6+deb13u1",
    "5.2.3-8",
    "6.1.2-2",
    "6.0+git20231212.4510c28+dfsg-3+b2",
    "1.0.0.70204-93~24.04",
    "1.1.1.70204-93~24.04",
    "0.14.0.70204-93~24.04",
    "7.2.4.70204-93~24.04",
    "7.2.53211.70204-93~24.04",
    "6.0.0-1",
    "1:2009.1202-6",
    "3.24+really3.22-4",
]


def dpkg_compare(a: str, b: str) -> int:
    for op, result in (("lt", -1), ("eq", 0), ("gt", 1)):
        if subprocess.run(["dpkg", "--compare-versions", a, op, b]).returncode == 0:
            return result
    raise AssertionError(f"dpkg could not compare {a!r} and {b!r}")


@pytest.fixture(scope="module")
def oracle():
    # One dpkg run per pair would take seconds; a single shell loop prints all answers. Each unordered pair once: the
    # test checks both orders against it.
    pairs = list(itertools.combinations_with_replacement(VERSIONS, 2))
    script = "\n".join(
        f"if dpkg --compare-versions '{a}' lt '{b}' 2>/dev/null; then echo -1; "
        f"elif dpkg --compare-versions '{a}' eq '{b}' 2>/dev/null; then echo 0; "
        f"elif dpkg --compare-versions '{a}' gt '{b}' 2>/dev/null; then echo 1; else echo invalid; fi"
        for a, b in pairs
    )
    out = subprocess.run(["sh"], input=script, capture_output=True, text=True, check=True).stdout.split()
    assert "invalid" not in out, "dpkg refused a version in VERSIONS: keep only versions dpkg accepts"
    return dict(zip(pairs, map(int, out)))


def test_every_pair_compares_as_dpkg_does(oracle):
    wrong = [
        (a, b, compare_versions(a, b), want)
        for (a, b), want in oracle.items()
        if compare_versions(a, b) != want or compare_versions(b, a) != -want
    ]
    assert not wrong, f"differs from dpkg (a, b, ours, dpkg's): {wrong[:10]}"


def test_oracle_is_not_trivial(oracle):
    # A broken oracle (e.g. dpkg missing) would make the test above vacuous.
    assert set(oracle.values()) == {-1, 0, 1}
    assert dpkg_compare("5.7.1-3", "1.0.0.70204-93~24.04") == 1  # the collision the project exists for


def test_the_ubuntu_collision_sorts_as_on_real_hosts():
    # Ubuntu's rocminfo/hipcc/rocm-cmake sort above AMD's 7.2.4 packages (ROCm issues #3656, #6367).
    assert compare_versions("5.7.1-3build1", "1.0.0.70204-93~24.04") > 0
    assert compare_versions("6.0.0-1", "0.14.0.70204-93~24.04") > 0


@pytest.mark.parametrize(
    "version, operator, wanted, expected",
    [
        ("5.7.1-3", ">=", "4.5.2", True),
        ("5.7.1-3", ">>", "5.7.1-3", False),
        ("5.7.1-3", "<<", "5.7.1-3", False),
        ("5.7.1-3", "<=", "5.7.1-3", True),
        ("5.7.1-3", "=", "5.7.1-3", True),
        ("5.2.3-8", ">=", "5.2.0~", True),
        ("1.0~rc1", ">=", "1.0", False),
        ("1.0", "<", "1.0", True),  # obsolete "<" means "<="
        ("1.0", ">", "1.0", True),  # obsolete ">" means ">="
    ],
)
def test_satisfies(version, operator, wanted, expected):
    assert satisfies(version, operator, wanted) is expected


def test_unknown_operator_names_it():
    with pytest.raises(ValueError, match="'=>'"):
        satisfies("1", "=>", "1")
