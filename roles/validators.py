"""The validators of roles/settings.py's schema: each takes a raw inventory value and returns the normalised one, or
raises `Invalid` with a message that says what is wrong with the value and how to write it (the schema adds the host,
the key and where the value came from). Pure: no pyinfra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from roles import pins
from verify.api import known_releases

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_BUILD = re.compile(r"\d{5,6}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# useradd's default NAME_REGEX on Debian/Ubuntu (a trailing $ is for machine accounts).
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}\$?")


class Invalid(ValueError):
    """Raised by a validator: the message says what is wrong with the value and how to write it."""


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"a {type(value).__name__} ({value!r})"


def _string(value: Any, example: str) -> str:
    if not isinstance(value, str):
        hint = ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # pyinfra's --data turns 7.2 into a float and 70204 into an int.
            hint = f" (on the command line, quote it twice: --data {{key}}='\"{example}\"')"
        raise Invalid(f"got {_describe(value)}, expected a string such as {example!r}{hint}")
    return value


def _matching(pattern: re.Pattern, value: Any, example: str, expected: str) -> str:
    text = _string(value, example)
    if not pattern.fullmatch(text):
        raise Invalid(f"got {text!r}, expected {expected}")
    return text


def release(value: Any) -> str:
    return _matching(_RELEASE, value, "7.2.4", "a release as MAJOR.MINOR.PATCH such as '7.2.4'")


def known_release(value: Any) -> str:
    """A release this checkout has a file for (verify/stack/releases/X.Y.Z.json: what the release is)."""
    text = release(value)
    if text not in known_releases():
        raise Invalid(f"got {text!r}, a ROCm release this checkout does not know — known: "
                      f"{', '.join(known_releases())} (a release is added as verify/stack/releases/{text}.json)")
    return text


def build_number(value: Any) -> str:
    return _matching(_BUILD, value, "70204", "AMD's build number (major*10000 + minor*100 + patch) such as '70204'")


def url(value: Any) -> str:
    text = _string(value, "https://repo.radeon.com")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text):
        raise Invalid(f"got {text!r}, expected an http(s) URL such as 'https://repo.radeon.com'")
    return text.rstrip("/")


def optional_sha256(value: Any) -> str | None:
    if value is None:
        return None
    text = _string(value, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08").strip().lower()
    if not _SHA256.fullmatch(text):
        raise Invalid(f"got {value!r}, expected a sha256 of 64 hex digits (sha256sum FILE), or None")
    return text


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"got {_describe(value)}, expected True or False")
    return value


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid(f"got {_describe(value)}, expected a whole number >= 0")
    return value


def user_name(value: Any) -> str:
    return _matching(_USER_NAME, value, "alice", "a user name such as 'alice' (lower case, digits, '_' or '-')")


def user_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise Invalid(f"got the string {value!r}, expected a list of user names such as [{value!r}]")
    if not isinstance(value, (list, tuple)):
        raise Invalid(f"got {_describe(value)}, expected a list of user names such as ['alice']")
    return tuple(user_name(item) for item in value)


def absolute_path(value: Any) -> str:
    text = _string(value, "/opt/rocm-fleet/venv")
    if not text.startswith("/"):
        raise Invalid(f"got the relative path {text!r}, expected an absolute path such as '/opt/rocm-fleet/venv'")
    normal = os.path.normpath(text)
    if normal != text.rstrip("/") or "\n" in text:
        raise Invalid(f"got {text!r}, expected a plain absolute path without '..', '//' or '.' parts")
    return normal


def optional_absolute_path(value: Any) -> str | None:
    return None if value is None else absolute_path(value)


def pip_requirement(value: Any) -> str:
    text = _string(value, pins.TORCH_SPEC)
    try:
        Requirement(text)
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]
        raise Invalid(f"got {text!r}, not a pip requirement ({reason}); write one such as {pins.TORCH_SPEC!r}") from None
    return text


def python_version(value: Any) -> str:
    text = _string(value, pins.BITSANDBYTES_VERSION)
    try:
        Version(text)
    except InvalidVersion:
        raise Invalid(f"got {text!r}, expected a version such as {pins.BITSANDBYTES_VERSION!r}") from None
    return text


def optional_text(value: Any) -> str | None:
    if value is None:
        return None
    text = _string(value, "torch 2.13.0 CPU, stand-in for the ROCm wheel")
    if not text.strip() or "\n" in text:
        raise Invalid(f"got {text!r}, expected one line of text, or None")
    return text


def controller_path(value: Any) -> str:
    text = _string(value, "reports")
    if not text.strip() or "\n" in text:
        raise Invalid(f"got {text!r}, expected a directory on the controller such as 'reports'")
    return text


def one_of(*choices: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise Invalid(f"got {_describe(value)}, expected one of: {', '.join(repr(c) for c in choices)}")
        return value

    check.choices = choices  # type: ignore[attr-defined]
    return check
