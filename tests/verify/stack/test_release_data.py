"""verify/stack/release_data.py: the release data file is read from the package, and its colliding names are the
colliding-packages stage's (one list of facts, two readers: a test keeps them equal)."""

from __future__ import annotations

from roles.colliding_packages.data import COLLIDING_PACKAGES
from verify.stack.release_data import release_data, release_folder


def test_the_release_data_of_7_2_4():
    data = release_data("7.2.4")
    assert data.release == "7.2.4" and data.build == "70204"
    assert data.apt.origin == "repo.radeon.com" and data.apt.pin_priority == 600
    assert data.apt.pin_files[0] == "/etc/apt/preferences.d/repo-radeon-pin-600"


def test_the_colliding_names_are_the_colliding_packages_stages():
    data = release_data("7.2.4")
    assert [(p.name, p.amd_component_version) for p in data.apt.colliding_packages] == [
        (p.name, p.amd_component_version) for p in COLLIDING_PACKAGES]


def test_an_unknown_release_has_no_data_and_a_malformed_one_is_refused():
    assert release_data("7.2.5") is None
    assert release_data("../../etc/passwd") is None


def test_release_folder():
    assert release_folder("7.2.4") == "7.2.4" and release_folder("7.2.0") == "7.2"
