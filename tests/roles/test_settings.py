"""roles/settings.py: the inventory data contract. Unit checks of each validator's verdict, then the real pyinfra CLI:
bad data refuses the whole run with one line naming host, key and fix, and no command runs on any host."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from roles import pins
from roles.settings import (
    KEYS,
    SCHEMA,
    HostSettings,
    InventoryDataError,
    check_data,
    markdown_table,
    require_valid_inventory,
)
from roles.validators import PLAIN_CHARACTERS
from tests.support.extra_release import extra_release

REPO = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))


def _problems(data: dict) -> list[tuple[str, str]]:
    return [(p.key, p.detail) for p in check_data("ws-01", data, foreign_keys={"ssh_port", "fake_responses"})[1]]


def test_defaults_come_from_pins():
    settings, problems = check_data("ws-01", {})
    assert problems == ()
    assert isinstance(settings, HostSettings)
    assert (settings.rocm_release, settings.rocm_build, settings.venv_path, settings.min_free_disk_gb) == (
        pins.ROCM_RELEASE,
        pins.ROCM_BUILD,
        pins.VENV_PATH,
        pins.MIN_FREE_DISK_GB,
    )
    assert settings.workstation_users == ()


def test_the_metrics_file_is_on_by_default_and_off_with_none():
    assert check_data("ws-01", {})[0].node_exporter_textfile_dir == "/var/lib/prometheus/node-exporter"
    assert check_data("ws-01", {"node_exporter_textfile_dir": None})[0].node_exporter_textfile_dir is None
    assert (
        check_data("ws-01", {"node_exporter_textfile_dir": "/srv/metrics/"})[0].node_exporter_textfile_dir
        == "/srv/metrics"
    )


def test_valid_data_is_normalised():
    settings, _ = check_data(
        "ws-01",
        {
            "repo_radeon_base_url": "http://mirror.lab:8080/radeon/",
            "workstation_users": ["maria", "tom"],
            "venv_path": "/srv/venvs/ml/",
            "amdgpu_install_sha256": "AB" * 32,
            "wheelhouse": "/srv/wheels",
        },
    )
    assert settings.repo_radeon_base_url == "http://mirror.lab:8080/radeon"
    assert settings.workstation_users == ("maria", "tom")
    assert settings.venv_path == "/srv/venvs/ml"
    assert settings.amdgpu_install_sha256 == "ab" * 32


@pytest.mark.parametrize(
    ("data", "key", "detail"),
    [
        (
            {"rocm_release": 7.2},
            "rocm_release",
            "got the number 7.2, expected a string such as '7.2.4' (on the command line, quote it twice: "
            "--data rocm_release='\"7.2.4\"')",
        ),
        ({"rocm_release": "7.2"}, "rocm_release", "got '7.2', expected a release as MAJOR.MINOR.PATCH such as '7.2.4'"),
        (
            {"rocm_build": 70204},
            "rocm_build",
            "got the number 70204, expected a string such as '70204' (on the command "
            "line, quote it twice: --data rocm_build='\"70204\"')",
        ),
        (
            {"rocm_release": "7.2.3"},
            "rocm_release",
            "got '7.2.3', a ROCm release this checkout does not know — known: 7.2.4 (a release is added as "
            "verify/stack/releases/7.2.3.json)",
        ),
        (
            {"rocm_build": "70205"},
            "rocm_build",
            "'70205' does not match rocm_release '7.2.4', whose build number is '70204': set both together",
        ),
        (
            {"repo_radeon_base_url": "repo.radeon.com"},
            "repo_radeon_base_url",
            "got 'repo.radeon.com', expected an http(s) URL such as 'https://repo.radeon.com'",
        ),
        (
            {"venv_path": "opt/venv"},
            "venv_path",
            "got the relative path 'opt/venv', expected an absolute path such as '/opt/rocm-fleet/venv'",
        ),
        (
            {"venv_path": "/opt/../venv"},
            "venv_path",
            "got '/opt/../venv', expected a plain absolute path without '..', '//' or '.' parts",
        ),
        (
            {"wheelhouse": "wheels"},
            "wheelhouse",
            "got the relative path 'wheels', expected an absolute path such as '/opt/rocm-fleet/venv'",
        ),
        (
            {"node_exporter_textfile_dir": "node-exporter"},
            "node_exporter_textfile_dir",
            "got the relative path 'node-exporter', expected an absolute path such as '/opt/rocm-fleet/venv'",
        ),
        ({"node_exporter_textfile_dir": "/var/lib/node exporter"}, "node_exporter_textfile_dir", None),
        (
            {"wheelhouse_url": "http://controller.lab:8765"},
            "wheelhouse_url",
            "'http://controller.lab:8765' needs `wheelhouse` (the controller's directory, whose sha256 the hosts "
            "install with): set wheelhouse too, or set this to None",
        ),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_url": "ftp://mirror.lab/wheels"},
            "wheelhouse_url",
            "got 'ftp://mirror.lab/wheels', expected an http(s) URL such as 'https://repo.radeon.com'",
        ),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_serve": "8765"},
            "wheelhouse_serve",
            "got '8765', expected ADDRESS:PORT such as '127.0.0.1:8765' or '[::1]:8765' (a port from 1 "
            "to 65535), or None",
        ),
        ({"wheelhouse": "/srv/wheels", "wheelhouse_serve": "127.0.0.1:70000"}, "wheelhouse_serve", None),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_serve": "0.0.0.0:8765"},
            "wheelhouse_serve",
            "'0.0.0.0:8765' listens on every address, which no host can connect to: set wheelhouse_url to the "
            "controller as the hosts reach it (e.g. 'http://controller.lab:8765'), or serve on that address",
        ),
        (
            {"wheelhouse_seed": "ws1", "wheelhouse_seed_serve": "10.0.0.11:8765"},
            "wheelhouse_seed",
            "'ws1' needs `wheelhouse` (the controller's directory that the seed gets and serves): set wheelhouse too, "
            "or set this to None",
        ),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_seed": "ws1"},
            "wheelhouse_seed_serve",
            "None, but wheelhouse_seed is set: relay mode needs both — the seed host's name and where it serves "
            "(ADDRESS:PORT of the seed), or neither",
        ),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_seed_serve": "10.0.0.11:8765"},
            "wheelhouse_seed",
            "None, but wheelhouse_seed_serve is set: relay mode needs both — the seed host's name and where it "
            "serves (ADDRESS:PORT of the seed), or neither",
        ),
        (
            {
                "wheelhouse": "/srv/wheels",
                "wheelhouse_seed": "ws1",
                "wheelhouse_seed_serve": "10.0.0.11:8765",
                "wheelhouse_serve": "127.0.0.1:8765",
            },
            "wheelhouse_serve",
            "'127.0.0.1:8765' and wheelhouse_seed 'ws1' both say where the hosts pull from: set one of them, the other "
            "to None",
        ),
        (
            {"wheelhouse": "/srv/wheels", "wheelhouse_seed": "ws1", "wheelhouse_seed_serve": "0.0.0.0:8765"},
            "wheelhouse_seed_serve",
            "'0.0.0.0:8765' is every address of the seed, which no host can connect to: give the seed's address that "
            "the other hosts reach, such as '10.0.0.11:8765'",
        ),
        ({"stray_policy": "purge"}, "stray_policy", "got the string 'purge', expected one of: 'report', 'remove'"),
        (
            {"rocm_other_release": "side_by_side"},
            "rocm_other_release",
            "got the string 'side_by_side', expected one of: 'stop', 'side-by-side'",
        ),
        ({"gpu_required": "no"}, "gpu_required", "got the string 'no', expected True or False"),
        ({"min_free_disk_gb": -1}, "min_free_disk_gb", "got the number -1, expected a whole number >= 0"),
        ({"dpkg_lock_timeout": 1.5}, "dpkg_lock_timeout", "got the number 1.5, expected a whole number >= 0"),
        ({"max_result_age": -1}, "max_result_age", "got the number -1, expected a whole number >= 0"),
        ({"max_result_age": "7d"}, "max_result_age", "got the string '7d', expected a whole number >= 0"),
        ({"max_result_age": True}, "max_result_age", "got the boolean True, expected a whole number >= 0"),
        (
            {"workstation_users": "maria"},
            "workstation_users",
            "got the string 'maria', expected a list of user names such as ['maria']",
        ),
        (
            {"workstation_users": ["Maria Lopez"]},
            "workstation_users",
            "got 'Maria Lopez', expected a user name such as 'alice' (lower case, digits, '_' or '-')",
        ),
        ({"torch_spec": "torch=2.13"}, "torch_spec", None),
        (
            {"bitsandbytes_version": "latest"},
            "bitsandbytes_version",
            "got 'latest', expected a version such as '0.50.1'",
        ),
        (
            {"amdgpu_install_sha256": "deadbeef"},
            "amdgpu_install_sha256",
            "got 'deadbeef', expected a sha256 of 64 hex digits (sha256sum FILE), or None",
        ),
        ({"rocm_relase": "7.2.4"}, "rocm_relase", "unknown key, did you mean rocm_release?"),
        ({"workstation_user": ["maria"]}, "workstation_user", "unknown key, did you mean workstation_users?"),
        ({"stray_polcy": "report"}, "stray_polcy", "unknown key, did you mean stray_policy?"),
    ],
)
def test_each_bad_value_is_one_problem_naming_key_and_fix(data, key, detail):
    problems = _problems(data)
    assert [k for k, _ in problems] == [key]
    if detail is not None:
        assert problems[0][1] == detail
    elif key == "wheelhouse_serve":
        assert problems[0][1].startswith("got '127.0.0.1:70000', expected ADDRESS:PORT")
    elif key == "torch_spec":
        assert problems[0][1].startswith("got 'torch=2.13', not a pip requirement (")
    else:  # it reaches the hook line and the verifier's arguments: the character policy
        assert problems[0][1].startswith("got '/var/lib/node exporter', which has a space at character 14")


def test_pull_mode_settings_pass_with_a_wheelhouse():
    settings, problems = check_data(
        "ws1",
        {
            "wheelhouse": "/srv/wheels",
            "wheelhouse_serve": "0.0.0.0:8765",
            "wheelhouse_url": "http://controller.lab:8765/",
        },
    )
    assert problems == ()
    assert (settings.wheelhouse_serve, settings.wheelhouse_url) == ("0.0.0.0:8765", "http://controller.lab:8765")
    local = {"wheelhouse": "/srv/wheels", "wheelhouse_serve": "[::1]:8765", "ssh_hostname": "127.0.0.1"}
    assert _problems(local) == []


@pytest.mark.parametrize(
    ("data", "refused"),
    [
        ({"wheelhouse_serve": "127.0.0.1:8765"}, True),  # ws-01 is not this machine: it cannot reach the loopback
        ({"wheelhouse_serve": "[::1]:8765", "ssh_hostname": "ws-01.lab"}, True),
        ({"wheelhouse_serve": "localhost:8765", "wheelhouse_url": "http://127.0.0.2:8765"}, True),  # not a forward
        ({"wheelhouse_serve": "127.0.0.1:8765", "ssh_hostname": "127.0.0.1"}, False),  # a host on this machine
        ({"wheelhouse_serve": "127.0.0.1:8765", "wheelhouse_url": "http://gateway.lab:9000"}, False),  # a forward
        ({"wheelhouse_serve": "10.0.0.1:8765"}, False),
    ],
)
def test_a_loopback_server_is_refused_for_hosts_that_cannot_reach_it(data, refused):
    problems = _problems({"wheelhouse": "/srv/wheels", **data})
    if not refused:
        assert problems == []
        return
    address = data.get("ssh_hostname", "ws-01")
    assert problems == [
        (
            "wheelhouse_serve",
            f"{data['wheelhouse_serve']!r} is a loopback address of the controller, which ws-01 ({address}) cannot "
            "reach: serve on an address of the controller that the hosts reach (e.g. '10.0.0.1:8765'), or set "
            "wheelhouse_url to the forward that reaches this one",
        )
    ]


def test_relay_mode_settings_pass_with_a_wheelhouse():
    settings, problems = check_data(
        "ws2", {"wheelhouse": "/srv/wheels", "wheelhouse_seed": "ws1", "wheelhouse_seed_serve": "10.0.0.11:8765"}
    )
    assert problems == ()
    assert (settings.wheelhouse_seed, settings.wheelhouse_seed_serve) == ("ws1", "10.0.0.11:8765")


def _relay_state(seed: str, limit: list[str] | None = None, seed_data: dict | None = None):
    from pyinfra.api import Config, Inventory, State

    inventory = Inventory(
        (
            [("ws1", seed_data or {}), ("ws2", {}), ("ws3", {})],
            {"wheelhouse": "/tmp", "wheelhouse_seed": seed, "wheelhouse_seed_serve": "127.0.0.1:8765"},
        )
    )
    state = State(inventory, Config())
    if limit is not None:
        state.limit_hosts = [inventory.get_host(name) for name in limit]
    return state


def test_the_seed_must_be_a_host_of_the_run_or_the_run_is_refused_before_any_host_is_touched():
    """The seed serves the others: a seed not in the inventory, or limited out of the run, refuses the whole run."""
    with pytest.raises(InventoryDataError) as missing:
        require_valid_inventory(_relay_state("ws9"))
    assert str(missing.value) == (
        "inventory data of host ws1, key wheelhouse_seed (group data 'all'): 'ws9' is not a host of this inventory: "
        "name the inventory host that gets the wheelhouse and serves it (and 2 more: ws2/wheelhouse_seed, "
        "ws3/wheelhouse_seed)"
    )
    with pytest.raises(InventoryDataError) as limited:
        require_valid_inventory(_relay_state("ws1", limit=["ws2"]))
    assert str(limited.value) == (
        "inventory data of host ws2, key wheelhouse_seed (group data 'all'): 'ws1' is not in this run (--limit): the "
        "other hosts pull the wheelhouse from it — run it with them"
    )
    require_valid_inventory(_relay_state("ws1"))
    require_valid_inventory(_relay_state("ws1", limit=["ws1"]))


_PULLS_ITSELF = (
    "pulls the wheelhouse itself (its wheelhouse_url, wheelhouse_serve or wheelhouse_seed), so it has no "
    "wheels to serve: the seed must get them pushed — set those to None for it"
)


@pytest.mark.parametrize(
    ("seed_data", "first"),
    [
        (
            {"wheelhouse": "/var/tmp"},
            "host ws2, key wheelhouse_seed (group data 'all'): 'ws1' gets another wheelhouse ('/var/tmp', this host's "
            "is '/tmp'): give the seed and the hosts it serves the same one",
        ),
        (
            {"wheelhouse_seed": None, "wheelhouse_seed_serve": None, "wheelhouse_url": "http://mirror.lab/wheels"},
            f"host ws2, key wheelhouse_seed (group data 'all'): 'ws1' {_PULLS_ITSELF}",
        ),
        # ws1 names ws3 as its seed, whose seed is ws1: neither gets the wheels pushed.
        ({"wheelhouse_seed": "ws3"}, f"host ws1, key wheelhouse_seed (host data): 'ws3' {_PULLS_ITSELF}"),
    ],
)
def test_a_seed_that_would_not_hold_this_hosts_wheelhouse_refuses_the_run(seed_data, first):
    with pytest.raises(InventoryDataError) as refused:
        require_valid_inventory(_relay_state("ws1", seed_data=seed_data))
    assert str(refused.value).startswith(f"inventory data of {first} (and "), str(refused.value)
    # Its own data saying nothing about relay mode is fine: it gets the wheelhouse pushed.
    require_valid_inventory(_relay_state("ws1", seed_data={"wheelhouse_seed": None, "wheelhouse_seed_serve": None}))


# --- one character policy for what reaches a host (venv_path, the URLs, bitsandbytes_version) -------------------------

PATH_POLICY = (
    "a path may hold only ASCII letters, digits and _ @ % + = : , . / - — use a directory whose path has "
    "only those, e.g. '/opt/rocm-fleet/venv'"
)


@pytest.mark.parametrize(
    ("venv_path", "named"),
    [
        ("/opt/a b", "a space at character 7"),
        ("/opt/a\tb", "a tab (U+0009) at character 7"),
        ("/opt/a\nb", "a line feed (U+000A) at character 7"),
        ("/opt/a\rb", "a carriage return (U+000D) at character 7"),
        ("/opt/\x1b[31mred", "an escape character (U+001B) at character 6"),
        ("/opt/a\x01b", "the control character U+0001 at character 7"),
        ("/opt/a\x7fb", "the control character U+007F at character 7"),
        ("/opt/it's", "a single quote (') at character 8"),
        ('/opt/say"hi"', 'a double quote (") at character 9'),
        ("/opt/$(touch /tmp/pwned)", "'$' at character 6"),
        ("/opt/`id`", "a backquote (`) at character 6"),
        ("/opt/${HOME}", "'$' at character 6"),
        ("/opt/a;b", "';' at character 7"),
        ("/opt/a&b", "'&' at character 7"),
        ("/opt/a|b", "'|' at character 7"),
        ("/opt/a>b", "'>' at character 7"),
        ("/opt/v*", "'*' at character 7"),
        ("/opt/v?", "'?' at character 7"),
        ("/opt/[v]", "'[' at character 6"),
        ("/opt/~v", "'~' at character 6"),
        ("/opt/a\\b", "'\\\\' at character 7"),
        ("/opt/a#b", "'#' at character 7"),
        ("/opt/café", "the non-ASCII character 'é' (U+00E9) at character 9"),
        ("/opt/a\u00a0b", "the non-ASCII character (U+00A0) at character 7"),  # a no-break space: not printable
        ("/opt/\u0432\u0435\u043d\u0432", "the non-ASCII character 'в' (U+0432) at character 6"),
    ],
)
def test_each_character_outside_the_policy_is_named_with_its_position(venv_path, named):
    """Each class of character a shell, apt's configuration or sources.list syntax, df's output or a terminal could
    misread: one problem, naming the character, where it is, and the fix."""
    assert _problems({"venv_path": venv_path}) == [
        ("venv_path", f"got {venv_path!r}, which has {named}: {PATH_POLICY}")
    ]


@pytest.mark.parametrize(
    ("data", "key", "named"),
    [
        ({"repo_radeon_base_url": "https://mirror.lab/amd radeon"}, "repo_radeon_base_url", "a space at character 23"),
        ({"repo_radeon_base_url": "https://mirror.lab/radeon#main"}, "repo_radeon_base_url", "'#' at character 26"),
        ({"repo_radeon_base_url": "https://mirror.lab/radeon?x=1"}, "repo_radeon_base_url", "'?' at character 26"),
        (
            {"repo_radeon_base_url": "https://spiegel.bücher.de"},
            "repo_radeon_base_url",
            "the non-ASCII character 'ü' (U+00FC) at character 18",
        ),
        ({"torch_index_url": "https://idx.lab/$(id)"}, "torch_index_url", "'$' at character 17"),
        ({"torch_index_url": "https://idx.lab/whl\n"}, "torch_index_url", "a line feed (U+000A) at character 20"),
    ],
)
def test_urls_follow_the_same_policy_and_say_how_to_encode(data, key, named):
    [(found, detail)] = _problems(data)
    assert found == key
    assert detail == (
        f"got {data[key]!r}, which has {named}: a URL may hold only ASCII letters, digits and "
        "_ @ % + = : , . / - — write that character percent-encoded (a space as %20)"
    )


def test_a_percent_encoded_url_and_plain_paths_pass():
    settings, problems = check_data(
        "ws-01",
        {
            "repo_radeon_base_url": "https://mirror.lab/amd%20radeon",
            "venv_path": "/srv/ml-team/venv_3.11+rocm@7.2,a=b:c",
            "bitsandbytes_version": "0.50.1",
        },
    )
    assert problems == ()
    assert settings.repo_radeon_base_url == "https://mirror.lab/amd%20radeon"


def test_a_version_that_reaches_the_host_follows_the_policy():
    # packaging accepts surrounding whitespace; the apt hook's line and the verifier's arguments must not get it.
    assert _problems({"bitsandbytes_version": "0.50.1 "}) == [
        (
            "bitsandbytes_version",
            "got '0.50.1 ', which has a space at character 7: a version may hold only ASCII "
            "letters, digits and _ @ % + = : , . / - — write it as '0.50.1'",
        )
    ]


def test_controller_paths_and_labels_may_hold_spaces_and_letters_but_no_control_characters():
    """No host command carries them (reports are written and the wheelhouse read by the controller's Python), so a
    checkout under "My Projects" works; a control character would break their one-line messages or drive a terminal."""
    settings, problems = check_data(
        "ws-01",
        {
            "reports_dir": "/home/maría/My Reports",
            "wheelhouse": "/home/maría/My Wheels",
            "torch_label": "torch — CPU",
        },
    )
    assert problems == ()
    assert (settings.reports_dir, settings.wheelhouse) == ("/home/maría/My Reports", "/home/maría/My Wheels")
    assert _problems({"reports_dir": "rep\x1b]0;owned\x07"}) == [
        (
            "reports_dir",
            "got 'rep\\x1b]0;owned\\x07', which has an escape character (U+001B), expected a directory on "
            "the controller such as 'reports'",
        )
    ]
    assert _problems({"torch_label": "cpu\rFAKE PASS"}) == [
        (
            "torch_label",
            "got 'cpu\\rFAKE PASS', which has a carriage return (U+000D), expected one line of printable text, or None",
        )
    ]
    assert [k for k, _ in _problems({"wheelhouse": "/srv/w\nx"})] == ["wheelhouse"]


def test_the_policy_is_exactly_what_shlex_leaves_unquoted():
    """So a value that passed is one word in every shell command built from it, with or without shlex.quote."""
    for code in range(0x3000):
        char = chr(code)
        assert (char in PLAIN_CHARACTERS) == (shlex.quote(char) == char), repr(char)


# --- plain http: the installer deb's sha256 is the root of trust ------------------------------------------------------

HTTP_WITHOUT_SHA256 = (
    "'http://mirror.lab/radeon' is plain http and amdgpu_install_sha256 is None: nothing would "
    "check amdgpu-install_7.2.4.70204-1_all.deb, which brings the keyring apt trusts for every ROCm "
    "package — set amdgpu_install_sha256 (sha256sum of that deb from repo.radeon.com), or use an "
    "https mirror"
)


def test_an_http_mirror_without_the_installers_sha256_is_refused():
    assert _problems({"repo_radeon_base_url": "http://mirror.lab/radeon"}) == [
        ("repo_radeon_base_url", HTTP_WITHOUT_SHA256)
    ]
    # Named with the release actually asked for (a known one: a release is what has a file in verify/stack/releases/).
    with extra_release("7.2.5", "70205"):
        [(_, detail)] = _problems(
            {"repo_radeon_base_url": "http://mirror.lab/radeon", "rocm_release": "7.2.5", "rocm_build": "70205"}
        )
    assert "amdgpu-install_7.2.5.70205-1_all.deb" in detail


def test_an_http_mirror_with_the_sha256_and_an_https_one_without_pass():
    assert _problems({"repo_radeon_base_url": "http://mirror.lab/radeon", "amdgpu_install_sha256": "ab" * 32}) == []
    assert _problems({"repo_radeon_base_url": "https://mirror.lab/radeon"}) == []


def test_an_http_mirror_passes_when_pins_hold_the_sha256_for_every_codename(monkeypatch):
    monkeypatch.setattr(pins, "AMDGPU_INSTALL_SHA256", {"jammy": "ab" * 32})
    assert [k for k, _ in _problems({"repo_radeon_base_url": "http://mirror.lab/radeon"})] == [
        "repo_radeon_base_url"
    ]  # noble is missing: an Ubuntu 24.04 host would download it unchecked
    monkeypatch.setattr(pins, "AMDGPU_INSTALL_SHA256", {"jammy": "ab" * 32, "noble": "cd" * 32})
    assert _problems({"repo_radeon_base_url": "http://mirror.lab/radeon"}) == []


def test_a_build_number_not_in_amds_form_names_the_form():
    assert _problems({"rocm_build": "7024"}) == [
        ("rocm_build", "got '7024', expected AMD's build number (major*10000 + minor*100 + patch) such as '70204'")
    ]


def test_pyinfra_keys_and_unrelated_keys_pass():
    assert (
        _problems(
            {
                "ssh_port": 2222,
                "fake_responses": {},
                "_sudo": True,
                "_sudo_password": "x",
                "team": "vision",
                "rack_location": "B4",
                "rocm_notes": "re-imaged in May",
            }
        )
        == []
    )


def test_every_schema_key_is_a_host_settings_field_and_has_a_meaning():
    assert [key.name for key in SCHEMA] == list(KEYS)
    assert all(key.meaning and key.type for key in SCHEMA)


def test_readme_table_lists_exactly_the_schema_keys():
    """The README's variables table is pasted from `python -m roles.settings`; it must list exactly these keys."""
    readme = (REPO / "README.md").read_text()
    section = re.search(r"^## Inventory variables\n(.*?)(?=^## )", readme, flags=re.MULTILINE | re.DOTALL)
    assert section, "README.md has no '## Inventory variables' section"
    rows = re.findall(r"^\| `([a-z_0-9]+)` \|", section.group(1), flags=re.MULTILINE)
    assert rows, "README.md has no table of inventory variables: paste the output of `python -m roles.settings`"
    assert rows == list(KEYS), (
        "README's variables table differs from roles/settings.py: re-paste `python -m roles.settings`"
    )
    for line in markdown_table().splitlines()[2:]:
        assert line in section.group(1), f"README row out of date: {line}"


# --- the real CLI ---------------------------------------------------------------------------------------------------


def _inventory(tmp_path: Path, hosts: str) -> Path:
    path = tmp_path / "fleet.py"
    path.write_text(textwrap.dedent(hosts))
    return path


def _pyinfra(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYINFRA, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYINFRA_PROGRESS": "off", "HOME": "/root"},
    )


FLEET = """
    fast = {"fake_delay": 0, "fake_delay_jitter": 0, "gpu_required": False}
    lab = [
        ("@fake/ws-01", dict(fast)),
        ("@fake/ws-02", dict(fast, rocm_release=7.2)),  # a float: the inventory forgot the quotes
        ("@fake/ws-03", dict(fast)),
    ]
"""


@pytest.mark.slow
@pytest.mark.parametrize("task", ["deploy.py", "tasks/preflight.py", "tasks/colliding_packages.py", "tasks/rocm.py"])
def test_cli_refuses_the_whole_run_before_any_command_runs(tmp_path, task):
    inventory = _inventory(tmp_path, FLEET)
    done = _pyinfra(str(inventory), task, "-y", "-vv")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    errors = [line for line in output.splitlines() if "pyinfra error" in line]
    assert len(errors) == 1, output
    assert errors[0].endswith(
        "inventory data of host @fake/ws-02, key rocm_release (host data): got the number 7.2, "
        "expected a string such as '7.2.4' (on the command line, quote it twice: "
        "--data rocm_release='\"7.2.4\"')"
    )
    # -vv echoes every command sent to a host (">>> …"), facts included: there must be none, on any host.
    assert ">>>" not in output, output


@pytest.mark.slow
def test_cli_refuses_a_bad_max_result_age_before_the_status_task_asks_any_host():
    """max_result_age is read by the status task only; a bad one is still refused before any host is touched."""
    inventory_text = FLEET.replace("rocm_release=7.2", "max_result_age='7d'")
    with tempfile.TemporaryDirectory() as directory:
        inventory = _inventory(Path(directory), inventory_text)
        done = _pyinfra(str(inventory), "tasks/status.py", "-y", "-vv")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    errors = [line for line in output.splitlines() if "pyinfra error" in line]
    assert len(errors) == 1 and errors[0].endswith(
        "inventory data of host @fake/ws-02, key max_result_age (host data): got the string '7d', expected a whole "
        "number >= 0"
    ), output
    assert ">>>" not in output, output


@pytest.mark.slow
@pytest.mark.parametrize(
    ("venv_path", "named"),
    [
        ("/opt/a b", "a space at character 7"),
        ("/opt/$(touch /tmp/pwned)", "'$' at character 6"),
        ("/opt/caf\u00e9", "the non-ASCII character 'é' (U+00E9) at character 9"),
    ],
)
def test_cli_refuses_a_path_outside_the_policy_before_any_command_runs(tmp_path, venv_path, named):
    """Before, these passed validation and stopped the run only at the apt hook stage, after a venv was built there
    (and `/opt/a b` stopped the preflight first, with a misleading df message)."""
    inventory = _inventory(
        tmp_path,
        f"""
        hosts = [("@fake/ws-01", {{"fake_delay": 0, "fake_delay_jitter": 0, "gpu_required": False,
                                   "venv_path": {venv_path!r}}})]
    """,
    )
    done = _pyinfra(str(inventory), "deploy.py", "-y", "-vv")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    errors = [line for line in output.splitlines() if "pyinfra error" in line]
    assert len(errors) == 1, output
    assert errors[0].endswith(
        f"inventory data of host @fake/ws-01, key venv_path (host data): got {venv_path!r}, "
        f"which has {named}: {PATH_POLICY}"
    )
    assert ">>>" not in output, output


def test_cli_data_override_is_named_as_the_source(tmp_path):
    inventory = _inventory(
        tmp_path,
        """
        hosts = [("@fake/ws-01", {"fake_delay": 0, "fake_delay_jitter": 0, "gpu_required": False})]
    """,
    )
    done = _pyinfra(str(inventory), "tasks/preflight.py", "--data", "stray_polcy=remove", "--dry")
    assert done.returncode == 1
    assert (
        "inventory data of host @fake/ws-01, key stray_polcy (--data): unknown key, did you mean stray_policy?"
        in done.stderr
    )


def test_cli_group_data_is_named_as_the_source(tmp_path):
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "lab.py").write_text("dpkg_lock_timeout = '300'\n")
    inventory = _inventory(
        tmp_path,
        """
        lab = [("@fake/ws-01", {"fake_delay": 0, "fake_delay_jitter": 0, "gpu_required": False})]
    """,
    )
    done = _pyinfra(str(inventory), "tasks/preflight.py", "--dry")
    assert done.returncode == 1
    assert "key dpkg_lock_timeout (group data 'lab'): got the string '300', expected a whole number >= 0" in done.stderr


def test_cli_accepts_good_data_with_pyinfra_and_user_keys(tmp_path):
    inventory = _inventory(
        tmp_path,
        """
        hosts = [("@fake/ws-01", {"fake_delay": 0, "fake_delay_jitter": 0, "gpu_required": False,
                                  "min_free_disk_gb": 0, "_sudo": True, "team": "vision"})]
    """,
    )
    done = _pyinfra(str(inventory), "tasks/preflight.py", "--dry")
    assert done.returncode == 0, done.stderr
    assert "inventory data" not in done.stderr, done.stderr
    assert "Preflight | stop: host is not fit" in done.stderr  # the run went on to judge the (empty) fake host
