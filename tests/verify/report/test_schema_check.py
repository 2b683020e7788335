"""verify/report/schema_check.py: the standard-library check of report_schema.json, held to the `jsonschema` library
itself.

Both judge the same documents — reports built as the verifier builds them, the real verifier's own reports, and every
report made by breaking one of them in one place (each key removed, each value replaced by a value of every JSON
type, an unexpected key added) — and must agree on every one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from tests.support.report_samples import sample_report
from tests.support.verify_runs import cached_check, torch_cpu_venv
from verify.report.report import load_schema
from verify.report.schema_check import SchemaError, Validator

REPLACEMENTS = (
    None,
    True,
    False,
    0,
    1,
    1.0,
    1.5,
    -1,
    "",
    "x",
    "pass",
    "FAIL",
    "two\nlines",
    "7.2",
    "7.2.4",
    "2026-11-29T18:00:00Z",
    [],
    [{}],
    {},
    {"status": "pass", "reason": "r"},
)


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            if key != "evidence":  # free-form in the schema: nothing to disagree about, and large
                yield from _paths(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value[:2]):
            yield from _paths(child, path + (index,))


def _get(document, path):
    for part in path:
        document = document[part]
    return document


def variants(report: dict) -> Iterator[dict]:
    yield report
    for path in _paths(report):
        if path:
            parent, last = path[:-1], path[-1]
            broken = copy.deepcopy(report)
            container = _get(broken, parent)
            del container[last]
            yield broken
            for value in REPLACEMENTS:
                broken = copy.deepcopy(report)
                _get(broken, parent)[last] = value
                yield broken
        if isinstance(_get(report, path), dict):
            broken = copy.deepcopy(report)
            _get(broken, path)["unexpected"] = 1
            yield broken


def _agree(documents) -> int:
    schema = load_schema()
    ours = Validator(schema)
    theirs = jsonschema.Draft202012Validator(schema)
    count = 0
    for document in documents:
        error = ours.first_error(document)
        assert (error is None) == theirs.is_valid(document), (error, list(theirs.iter_errors(document))[:1], document)
        if error is not None:
            assert "\n" not in error
        count += 1
    return count


def test_it_agrees_with_jsonschema_on_every_one_place_break_of_a_report():
    samples = [
        sample_report(),
        sample_report({"linkage.static": "fail", "runtime.maps": "skip"}),
        sample_report(static_only=True),
    ]
    checked = sum(_agree(variants(report)) for report in samples)
    assert checked > 1000


@pytest.mark.slow
def test_it_agrees_with_jsonschema_on_the_real_verifiers_reports_and_their_breaks():
    report, done = cached_check(torch_cpu_venv(), "--device", "cpu")
    assert report is not None, done.stderr
    assert Validator(load_schema()).first_error(report) is None
    assert _agree(variants(report)) > 1000


def test_errors_name_where_and_what():
    report = sample_report()
    report["checks"][2]["status"] = "FAIL"
    assert Validator(load_schema()).first_error(report) == (
        "checks[2].status: 'FAIL' is not one of 'pass', 'warn', 'fail', 'skip'"
    )


@pytest.mark.parametrize(
    "schema, words",
    [
        ({"type": "object", "patternProperties": {}}, "patternProperties not implemented"),
        ({"properties": {"a": {"oneOf": []}}}, "#/properties/a: keyword(s) oneOf not implemented"),
        ({"additionalProperties": {"type": "string"}}, "only additionalProperties: false"),
        ({"$ref": "https://example.org/s.json"}, "only local references"),
    ],
)
def test_a_schema_using_more_than_it_implements_is_refused(schema, words):
    """So the report schema cannot grow past what is checked without this module growing with it."""
    with pytest.raises(SchemaError, match=re.escape(words)):
        Validator(schema)
