"""What a host sends back, made safe to read: one strict JSON document, and text that cannot act on a terminal.

Every document read back from a workstation (a report, a kept result, the status program's answer) is hostile input:
its text can be the venv owner's (the probe is their code, the venv's file names are theirs), and a file kept on the
host can be anything. So, once, where a document is read:
- `loads`: one JSON document, strictly — no duplicate keys (two parsers could read two different reports), no NaN,
  Infinity, no number too large for a float (1e400) or beyond 64 bits, no nesting deeper than a report has (json's
  recursion limit would raise RecursionError); every failure is a ValueError with one line;
- `inert_document` / `inert`: every C0 and C1 control, DEL and U+2028/2029 becomes a visible escape (`\\x1b`,
  `\\u2028`). Printed to an admin's terminal, an ESC starts a control sequence (erase the FAIL line, print a green
  PASS, OSC 52 writes the clipboard); a bare CR rewrites the line; U+2028/2029 end it in many viewers;
- `inert_text`: the same for a command's output of several lines (line feeds and tabs kept): what the verifier prints
  as root — `verify check`'s lines, the apt hook's, the boot check's journal lines — is made of the host's text too.
Markdown's own syntax is the Markdown writer's to escape (roles/verification/summary.py); HTML's, the page's.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROLS_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # \t and \n kept
MAX_DEPTH = 64  # a report nests about 8 deep


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with every control character (C0, DEL, C1, U+2028, U+2029) written as a visible escape."""
    return _CONTROLS.sub(_escape, text)


def inert_text(text: str) -> str:
    """Like `inert`, for a command's output of several lines: every control but the line feed and the tab escaped."""
    return _CONTROLS_IN_TEXT.sub(_escape, text)


def inert_document(value: Any) -> Any:
    """A parsed JSON document with every string (keys included) made inert; other values as they are."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {inert(key) if isinstance(key, str) else key: inert_document(item) for key, item in value.items()}
    if isinstance(value, list):
        return [inert_document(item) for item in value]
    return value


class _Refused(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Refused(f"key {inert(key)!r} appears twice")
        found[key] = value
    return found


def _constant(name: str):
    raise _Refused(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {inert(text[:40])} is too large")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 20:  # 2**64 has 20 digits: sizes, inodes and times are all below it
        raise _Refused(f"the number {inert(text[:40])}… is too large")
    return int(text)


def _depth(value: Any) -> int:
    deepest, level, stack = 0, 0, [(value, 1)]
    while stack:
        value, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(value, dict):
            stack.extend((item, level + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, level + 1) for item in value)
    return deepest


def loads(text: str, *, inert_strings: bool = True) -> Any:
    """One strict JSON document from `text`, its strings inert; ValueError with one line when it is not one.
    `inert_strings=False`: a document that carries other documents as text (the status program's answer, which holds
    each kept file's contents), whose own strings its reader makes inert where it uses them."""
    try:
        value = json.loads(
            text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_float, parse_int=_int
        )
    except _Refused as error:
        raise ValueError(str(error)) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} at line {error.lineno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if _depth(value) > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    return inert_document(value) if inert_strings else value
