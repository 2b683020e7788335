"""verify/report/host_input.py: what a host sends back is read strictly, and its text made inert — every control
character a terminal, a pager or a Markdown viewer would act on becomes a visible escape."""

from __future__ import annotations

import json

import pytest

from verify.report.host_input import MAX_DEPTH, inert, inert_document, loads

# What the venv's owner can put in a probe's error text, and what each would do unescaped.
HOSTILE = {
    "erase the line and print a green PASS": "FAIL\x1b[2K\r\x1b[32mPASS\x1b[0m",
    "OSC 52 writes the admin's clipboard": "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07",
    "C1 CSI (one byte)": "\x9b2J",
    "a bare CR rewrites the line": "FAIL: x\rPASS: all good   ",
    "line and paragraph separators": "one\u2028two\u2029three",
    "DEL and NUL": "a\x7fb\x00c",
    "a newline in a one-line reason": "reason\nPASS nf4.cuda0",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_every_control_character_becomes_a_visible_escape(text):
    made = inert(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in made), made
    assert inert(made) == made  # once is enough: inert text stays as it is


def test_the_escapes_say_what_was_there_and_printable_text_is_kept():
    assert inert("\x1b[31mred\x1b[0m café ✓") == "\\x1b[31mred\\x1b[0m café ✓"
    assert inert("a\u2028b\x9bc\x7f") == "a\\u2028b\\x9bc\\x7f"


def test_every_string_of_a_document_keys_included():
    document = {"reason": "\x1b[2K", "list": ["\r", 1, None, True], "\x07key": {"deep": "\u2029"}}
    assert inert_document(document) == {
        "reason": "\\x1b[2K",
        "list": ["\\x0d", 1, None, True],
        "\\x07key": {"deep": "\\u2029"},
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # json's own recursion limit: RecursionError
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} deep"),
        ('{"now": 1e400}', "the number 1e400 is too large"),  # a float('inf') that would overflow int()
        ('{"now": -1e400}', "the number -1e400 is too large"),
        ('{"now": NaN}', "NaN is not JSON"),
        ('{"now": Infinity}', "Infinity is not JSON"),
        ('{"size": ' + "9" * 4000 + "}", "is too large"),
        ('{"verdict": "pass", "verdict": "fail"}', "key 'verdict' appears twice"),
        ('{"a": 1} {"b": 2}', "Extra data at line 1"),
        ("", "Expecting value at line 1"),
    ],
)
def test_what_is_not_one_plain_json_document_is_one_line(text, why):
    with pytest.raises(ValueError) as refused:
        loads(text)
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_a_document_is_read_with_its_text_inert_unless_it_carries_documents():
    text = json.dumps({"reason": "\x1b]52;c;eA==\x07", "files": {"a": {"text": '{\n "x": 1\n}'}}})
    assert loads(text)["reason"] == "\\x1b]52;c;eA==\\x07"
    carried = loads(text, inert_strings=False)["files"]["a"]["text"]
    assert json.loads(carried) == {"x": 1}  # its newlines are JSON's whitespace, read by its own reader
