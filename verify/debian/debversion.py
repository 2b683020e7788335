"""Debian version strings: comparison exactly as dpkg does it (lib/dpkg/version.c), and relation checks.

`dpkg --compare-versions` is the oracle in the tests. This module does not validate versions the way dpkg's parser
does (it accepts anything and compares it); it is for versions read from dpkg's own database, which are valid.
"""

from __future__ import annotations

import functools
import string

_DIGITS = frozenset(string.digits)
_LETTERS = frozenset(string.ascii_letters)


def _order(char: str) -> int:
    # dpkg's weights for the non-digit parts: '~' sorts before everything, even the end of the string;
    # letters sort before other characters.
    if char == "~":
        return -1
    if char in _LETTERS:
        return ord(char)
    return ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternating non-digit runs (compared by `_order`) and digit runs (compared as numbers)."""
    i = j = 0
    len_a, len_b = len(a), len(b)
    while i < len_a or j < len_b:
        while (i < len_a and a[i] not in _DIGITS) or (j < len_b and b[j] not in _DIGITS):
            order_a = _order(a[i]) if i < len_a and a[i] not in _DIGITS else 0
            order_b = _order(b[j]) if j < len_b and b[j] not in _DIGITS else 0
            if order_a != order_b:
                return -1 if order_a < order_b else 1
            i += 1
            j += 1
        start_a, start_b = i, j
        while i < len_a and a[i] in _DIGITS:
            i += 1
        while j < len_b and b[j] in _DIGITS:
            j += 1
        number_a = int(a[start_a:i] or 0)
        number_b = int(b[start_b:j] or 0)
        if number_a != number_b:
            return -1 if number_a < number_b else 1
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, colon, rest = version.strip().partition(":")
    if not colon:
        epoch, rest = "0", epoch
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = revision, ""
    return int(epoch or 0), upstream, revision


@functools.lru_cache(maxsize=4096)
def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` sorts before, equal to or after `b` (`dpkg --compare-versions a lt/eq/gt b`)."""
    epoch_a, upstream_a, revision_a = _split(a)
    epoch_b, upstream_b, revision_b = _split(b)
    if epoch_a != epoch_b:
        return -1 if epoch_a < epoch_b else 1
    return _compare_part(upstream_a, upstream_b) or _compare_part(revision_a, revision_b)


# Relation operators of Depends and friends; "<" and ">" are dpkg's obsolete spellings of "<=" and ">=".
_RELATIONS = {
    "<<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    "<": lambda c: c <= 0,
    "=": lambda c: c == 0,
    ">=": lambda c: c >= 0,
    ">": lambda c: c >= 0,
    ">>": lambda c: c > 0,
}


def satisfies(version: str, operator: str, wanted: str) -> bool:
    """Whether `version` satisfies "(operator wanted)", e.g. satisfies("5.7.1-3", ">=", "4.5.2")."""
    try:
        test = _RELATIONS[operator]
    except KeyError:
        raise ValueError(f"unknown version relation {operator!r} (expected one of {' '.join(_RELATIONS)})") from None
    return test(compare_versions(version, wanted))
