"""roles/settings.py, the `verify_model` key: off, synthetic, or the absolute path of a checkpoint on the host."""

from __future__ import annotations

import pytest

from roles.settings import check_data


def _verify_model(value):
    settings, problems = check_data("ws-01", {"verify_model": value})
    return (settings.verify_model if settings else None), [(p.key, p.detail) for p in problems]


def test_default_is_synthetic():
    settings, problems = check_data("ws-01", {})
    assert problems == () and settings.verify_model == "synthetic"


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        ("off", "off"),
        ("synthetic", "synthetic"),
        ("/srv/models/llama-13b", "/srv/models/llama-13b"),
        ("/srv/models/llama-13b/", "/srv/models/llama-13b"),
    ],
)
def test_accepted_values(value, normal):
    assert _verify_model(value) == (normal, [])


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (
            "models/llama-13b",
            "got 'models/llama-13b', expected 'off', 'synthetic' or the absolute path of a checkpoint "
            "directory on the host such as '/srv/models/llama-13b'",
        ),
        (
            "Synthetic",
            "got 'Synthetic', expected 'off', 'synthetic' or the absolute path of a checkpoint directory on the "
            "host such as '/srv/models/llama-13b'",
        ),
        (
            "/srv/models/../llama",
            "got '/srv/models/../llama', expected a plain absolute path without '..', '//' or '.' parts",
        ),
        (False, "got the boolean False, expected a string such as 'synthetic'"),
    ],
)
def test_refused_values_name_the_key_and_the_fix(value, detail):
    assert _verify_model(value) == (None, [("verify_model", detail)])
