"""Checking a JSON document against verify/report/report_schema.json, with the standard library only.

Why not the `jsonschema` library: the rule that decides whether a report proves a pass (verify/report/report.py
`judge_report`) runs on the controller *and* on the workstation — in the apt hook, from the installed verifier, with
the host's python3 and nothing installed — and it must be the same rule in both places. So this module implements
exactly the keywords the report schema uses, with draft 2020-12's meaning: type, const, enum, required, properties,
additionalProperties (false), items, minItems, minLength, minimum, pattern, $ref (local), and the annotations
($schema, $id, title, description, $defs). A schema using any other keyword is refused when it is loaded
(`SchemaError`), so the schema cannot grow past what is checked without this module growing with it.
tests/verify/report/test_schema_check.py holds it to `jsonschema` itself (a test dependency) on every report the
tests produce and on hundreds of broken ones.

What it does not do: any other keyword, remote references, format checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})
_CHECKED = frozenset(
    {
        "type",
        "const",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minItems",
        "minLength",
        "minimum",
        "pattern",
        "$ref",
    }
)


class SchemaError(ValueError):
    """The schema uses something this checker does not implement."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    # 2020-12: a number with a zero fractional part is an integer (1.0 is), whatever the JSON text looked like.
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or (math.isfinite(v) and v == int(v))),
}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, objects and arrays compare by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Validator:
    def __init__(self, schema: Mapping[str, Any]):
        self.schema = schema
        self._patterns: dict[str, re.Pattern] = {}
        self._check_schema(schema, "#")

    def _check_schema(self, node: Any, where: str) -> None:
        if not isinstance(node, dict):
            raise SchemaError(f"{where}: a schema must be an object")
        unknown = set(node) - _ANNOTATIONS - _CHECKED
        if unknown:
            raise SchemaError(
                f"{where}: keyword(s) {', '.join(sorted(unknown))} not implemented by verify/report/schema_check.py"
            )
        if node.get("additionalProperties", False) is not False:
            raise SchemaError(f"{where}: only additionalProperties: false is implemented")
        ref = node.get("$ref")
        if ref is not None and not (isinstance(ref, str) and ref.startswith("#/")):
            raise SchemaError(f"{where}: only local references are implemented ($ref {ref!r})")
        if "pattern" in node:
            self._patterns[node["pattern"]] = re.compile(node["pattern"])
        for name, child in (node.get("properties") or {}).items():
            self._check_schema(child, f"{where}/properties/{name}")
        for name, child in (node.get("$defs") or {}).items():
            self._check_schema(child, f"{where}/$defs/{name}")
        if "items" in node:
            self._check_schema(node["items"], f"{where}/items")
        for kind in _as_list(node.get("type", [])):
            if kind not in _TYPES:
                raise SchemaError(f"{where}: type {kind!r} is not a JSON type")

    def _resolve(self, ref: str) -> Mapping[str, Any]:
        node: Any = self.schema
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def errors(self, instance: Any) -> Iterator[str]:
        """One line per violation, naming where in the document (e.g. `checks[2].status: 'FAIL' is not one of …`)."""
        yield from self._errors(instance, self.schema, "")

    def first_error(self, instance: Any) -> str | None:
        return next(self.errors(instance), None)

    def _errors(self, value: Any, node: Mapping[str, Any], where: str) -> Iterator[str]:
        shown = where or "the document"
        if "$ref" in node:
            yield from self._errors(value, self._resolve(node["$ref"]), where)
        if "type" in node:
            kinds = _as_list(node["type"])
            if not any(_TYPES[kind](value) for kind in kinds):
                yield f"{shown}: {_short(value)} is not of type {' or '.join(kinds)}"
                return  # the other keywords would only repeat it
        if "const" in node and not _equal(value, node["const"]):
            yield f"{shown}: {_short(value)} is not {_short(node['const'])}"
        if "enum" in node and not any(_equal(value, option) for option in node["enum"]):
            yield f"{shown}: {_short(value)} is not one of {', '.join(map(_short, node['enum']))}"
        if isinstance(value, str):
            if "minLength" in node and len(value) < node["minLength"]:
                yield f"{shown}: {_short(value)} is shorter than {node['minLength']}"
            if "pattern" in node and not self._patterns[node["pattern"]].search(value):
                yield f"{shown}: {_short(value)} does not match {node['pattern']!r}"
        if _is_number(value) and "minimum" in node and value < node["minimum"]:
            yield f"{shown}: {_short(value)} is less than {node['minimum']}"
        if isinstance(value, list):
            if "minItems" in node and len(value) < node["minItems"]:
                yield f"{shown}: {len(value)} item(s), fewer than {node['minItems']}"
            if "items" in node:
                for index, item in enumerate(value):
                    yield from self._errors(item, node["items"], f"{where}[{index}]")
        if isinstance(value, dict):
            for name in node.get("required", ()):
                if name not in value:
                    yield f"{shown}: {name!r} is missing"
            properties = node.get("properties") or {}
            for name, child in properties.items():
                if name in value:
                    yield from self._errors(value[name], child, f"{where}.{name}" if where else name)
            if node.get("additionalProperties") is False:
                extra = sorted(name for name in value if name not in properties)
                if extra:
                    yield f"{shown}: unexpected {', '.join(map(repr, extra))}"


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, list) else [value]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
