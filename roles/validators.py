"""The validators of roles/settings.py's schema: each takes a raw inventory value and returns the normalised one, or
raises `Invalid` with a message that says what is wrong with the value and how to write it (the schema adds the host,
the key and where the value came from). Pure: no pyinfra.

Paths, URLs and versions that reach a host follow one character policy (PLAIN_CHARACTERS): the message names the
first character outside it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from roles import pins
from verify.stack.rocm_release import known_releases

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_BUILD = re.compile(r"\d{5,6}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# useradd's default NAME_REGEX on Debian/Ubuntu (a trailing $ is for machine accounts).
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}\$?")

# The one character policy for every path, URL and version the inventory sends to a host (venv_path, the two URLs,
# bitsandbytes_version): ASCII letters, digits and _ @ % + = : , . / - — exactly the characters shlex.quote leaves
# unquoted. Such a value is one plain word wherever it goes: a shell command, the apt hook's line inside apt's
# double-quoted configuration string, a sources.list entry, df's output, a log line. So it is checked once, here,
# before any host is touched, and no later stage needs checks of its own. Refused: whitespace, quotes,
# $ ` \ ; & | < > ( ) [ ] { } * ? ! # ~ ^, control characters and non-ASCII letters (a URL can carry any of them
# percent-encoded, e.g. %20). Controller paths and labels, which no host command carries, only may not hold control
# characters (_printable).
PLAIN_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_@%+=:,./-")
_PLAIN_LIST = "ASCII letters, digits and _ @ % + = : , . / -"
_CONTROL_NAMES = {"\t": "a tab", "\n": "a line feed", "\r": "a carriage return", "\x1b": "an escape character"}


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


def _character(char: str) -> str:
    """A character as a one-line message names it."""
    if char == " ":
        return "a space"
    if char in _CONTROL_NAMES:
        return f"{_CONTROL_NAMES[char]} (U+{ord(char):04X})"
    if char.isascii() and not char.isprintable():
        return f"the control character U+{ord(char):04X}"
    if not char.isascii():
        shown = f"{char!r} " if char.isprintable() else ""
        return f"the non-ASCII character {shown}(U+{ord(char):04X})"
    return {"'": "a single quote (')", '"': 'a double quote (")', "`": "a backquote (`)"}.get(char, f"{char!r}")


def _plain(text: str, what: str, fix: str) -> str:
    """`text` when every character follows the policy (PLAIN_CHARACTERS); else Invalid naming the first other one."""
    for position, char in enumerate(text, 1):
        if char not in PLAIN_CHARACTERS:
            raise Invalid(
                f"got {text!r}, which has {_character(char)} at character {position}: {what} may hold only "
                f"{_PLAIN_LIST} — {fix}"
            )
    return text


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
        raise Invalid(
            f"got {text!r}, a ROCm release this checkout does not know — known: "
            f"{', '.join(known_releases())} (a release is added as verify/stack/releases/{text}.json)"
        )
    return text


def build_number(value: Any) -> str:
    return _matching(_BUILD, value, "70204", "AMD's build number (major*10000 + minor*100 + patch) such as '70204'")


def url(value: Any) -> str:
    text = _plain(
        _string(value, "https://repo.radeon.com"), "a URL", "write that character percent-encoded (a space as %20)"
    )
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Invalid(f"got {text!r}, expected an http(s) URL such as 'https://repo.radeon.com'")
    return text.rstrip("/")


def optional_url(value: Any) -> str | None:
    return None if value is None else url(value)


def split_address(text: str) -> tuple[str, int]:
    """ "127.0.0.1:8765" -> ("127.0.0.1", 8765); "[::1]:8765" -> ("::1", 8765). ValueError when it is not one — also
    for an address outside the character policy: the hosts' pip gets it in its URL."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ValueError(text)
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(text)
        host = host[1:-1]
    if not host or any(char not in PLAIN_CHARACTERS for char in host):
        raise ValueError(text)
    return host, int(port)


def is_loopback(address: str) -> bool:
    """Whether a host address is this machine's loopback (127.0.0.0/8, ::1, localhost): only local processes reach a
    server that listens there."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def optional_listen_address(value: Any) -> str | None:
    if value is None:
        return None
    text = _string(value, "127.0.0.1:8765")
    try:
        split_address(text)
    except ValueError:
        raise Invalid(
            f"got {text!r}, expected ADDRESS:PORT such as '127.0.0.1:8765' or "
            "'[::1]:8765' (a port from 1 to 65535), or None"
        ) from None
    return text


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


def _normalised_absolute(text: str) -> str:
    if not text.startswith("/"):
        raise Invalid(f"got the relative path {text!r}, expected an absolute path such as '/opt/rocm-fleet/venv'")
    normal = os.path.normpath(text)
    if normal != text.rstrip("/"):
        raise Invalid(f"got {text!r}, expected a plain absolute path without '..', '//' or '.' parts")
    return normal


def absolute_path(value: Any) -> str:
    """A path on the host: the character policy, absolute, normalised."""
    text = _string(value, "/opt/rocm-fleet/venv")
    if text.startswith("/"):
        _plain(text, "a path", "use a directory whose path has only those, e.g. '/opt/rocm-fleet/venv'")
    return _normalised_absolute(text)


def optional_absolute_path(value: Any) -> str | None:
    return None if value is None else absolute_path(value)


def model_source(value: Any) -> str:
    """The model check's model: 'off', 'synthetic', or a checkpoint directory on the host (a path, as above)."""
    text = _string(value, "synthetic")
    if text in ("off", "synthetic"):
        return text
    if not text.startswith("/"):
        raise Invalid(
            f"got {text!r}, expected 'off', 'synthetic' or the absolute path of a checkpoint directory on "
            "the host such as '/srv/models/llama-13b'"
        )
    return absolute_path(text)


def _printable(text: str, expected: str) -> str:
    """Controller paths and labels never reach a host command, so spaces and non-ASCII letters are fine in them; a
    control character is not: it would break the one-line messages and reports that show them (or drive a terminal)."""
    control = next((char for char in text if not char.isprintable()), None)
    if not text.strip() or control is not None:
        has = f", which has {_character(control)}" if control is not None else ""
        raise Invalid(f"got {text!r}{has}, expected {expected}")
    return text


def optional_controller_directory(value: Any) -> str | None:
    if value is None:
        return None
    text = _printable(_string(value, "/srv/wheelhouse"), "an absolute path on the controller such as '/srv/wheelhouse'")
    return _normalised_absolute(text)


def pip_requirement(value: Any) -> str:
    text = _string(value, pins.TORCH_SPEC)
    try:
        Requirement(text)
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]
        raise Invalid(
            f"got {text!r}, not a pip requirement ({reason}); write one such as {pins.TORCH_SPEC!r}"
        ) from None
    return text


def python_version(value: Any) -> str:
    text = _plain(_string(value, pins.BITSANDBYTES_VERSION), "a version", f"write it as {pins.BITSANDBYTES_VERSION!r}")
    try:
        Version(text)
    except InvalidVersion:
        raise Invalid(f"got {text!r}, expected a version such as {pins.BITSANDBYTES_VERSION!r}") from None
    return text


def optional_text(value: Any) -> str | None:
    if value is None:
        return None
    return _printable(
        _string(value, "torch 2.13.0 CPU, stand-in for the ROCm wheel"), "one line of printable text, or None"
    )


def controller_path(value: Any) -> str:
    return _printable(_string(value, "reports"), "a directory on the controller such as 'reports'")


def one_of(*choices: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise Invalid(f"got {_describe(value)}, expected one of: {', '.join(repr(c) for c in choices)}")
        return value

    check.choices = choices  # type: ignore[attr-defined]
    return check
