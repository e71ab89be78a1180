"""A standard-library validator for the protocol's JSON Schema (the keywords it uses).

The suite must run with nothing but Python installed, so it cannot rely on the
``jsonschema`` package. This module interprets exactly the keywords that
``dsh-memory-protocol-v1.schema.json`` (shipped beside it) uses, with JSON Schema 2020-12
meanings: ``maxLength`` counts code points, ``integer`` accepts ``3.0``, ``format:
date-time`` is RFC 3339. A keyword it does not know is an error, so a newer schema
cannot be half-checked without anyone noticing.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent / "dsh-memory-protocol-v1.schema.json"
_IGNORED = frozenset({"$schema", "$id", "title", "description"})
_KNOWN = frozenset({
    "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "minItems",
    "maxItems", "uniqueItems", "items", "required", "properties", "additionalProperties",
    "$ref", "format", "oneOf", "$defs",
}) | _IGNORED
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def load_schema() -> dict[str, Any]:
    """The protocol schema shipped with the suite."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


def is_date_time(value: str) -> bool:
    """RFC 3339 ``date-time`` (what JSON Schema's ``format: date-time`` means)."""
    m = _DATE_TIME.match(value)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        datetime(year, month, day, hour, minute, min(second, 59))  # 60: a leap second
    except ValueError:
        return False
    offset = m.group(8)
    if offset not in ("Z", "z") and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):
        return False
    return second <= 60


def _type_ok(value: Any, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    raise ValueError(f"schema uses an unknown type {name!r}")


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``True`` is not ``1``)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Validator:
    """Validates instances against one definition of the schema, e.g. ``exportEnvelope``."""

    def __init__(self, schema: dict[str, Any] | None = None) -> None:
        self.schema = schema if schema is not None else load_schema()

    def errors(self, instance: Any, definition: str | None = None) -> list[str]:
        """Every violation, each as ``<json path>: <problem>``; empty means valid."""
        node = self.schema if definition is None else self._ref(f"#/$defs/{definition}")
        out: list[str] = []
        self._check(instance, node, "$", out)
        return out

    def _ref(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = self.schema
        for part in ref[2:].split("/"):
            node = node[part]
        if not isinstance(node, dict):
            raise ValueError(f"$ref {ref!r} is not a schema")
        return node

    def _check(self, value: Any, node: dict[str, Any], path: str, out: list[str]) -> None:
        unknown = set(node) - _KNOWN
        if unknown:
            raise ValueError(f"schema keyword(s) not supported by schema_lite: {sorted(unknown)}")
        if "$ref" in node:
            self._check(value, self._ref(node["$ref"]), path, out)
        if "oneOf" in node:
            passing = 0
            for sub in node["oneOf"]:
                trial: list[str] = []
                self._check(value, sub, path, trial)
                passing += not trial
            if passing != 1:
                out.append(f"{path}: matches {passing} of the oneOf alternatives, not exactly 1")
        if "type" in node:
            names = node["type"] if isinstance(node["type"], list) else [node["type"]]
            if not any(_type_ok(value, n) for n in names):
                out.append(f"{path}: expected {' or '.join(names)}, got {json.dumps(value)[:80]}")
                return
        if "const" in node and not _same(value, node["const"]):
            out.append(f"{path}: must be {json.dumps(node['const'])}")
        if "enum" in node and not any(_same(value, v) for v in node["enum"]):
            out.append(f"{path}: {json.dumps(value)[:80]} is not one of {node['enum']}")
        if isinstance(value, str):
            self._string(value, node, path, out)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                "minimum" in node and value < node["minimum"]:
            out.append(f"{path}: {value} is below the minimum {node['minimum']}")
        if isinstance(value, list):
            self._array(value, node, path, out)
        if isinstance(value, dict):
            self._object(value, node, path, out)

    def _string(self, value: str, node: dict[str, Any], path: str, out: list[str]) -> None:
        if "minLength" in node and len(value) < node["minLength"]:
            out.append(f"{path}: shorter than {node['minLength']} characters")
        if "maxLength" in node and len(value) > node["maxLength"]:
            out.append(f"{path}: longer than {node['maxLength']} characters")
        if "pattern" in node and not re.search(node["pattern"], value):
            out.append(f"{path}: {value!r} does not match {node['pattern']}")
        if node.get("format") == "date-time" and not is_date_time(value):
            out.append(f"{path}: {value!r} is not an RFC 3339 date-time")

    def _array(self, value: list[Any], node: dict[str, Any], path: str, out: list[str]) -> None:
        if "minItems" in node and len(value) < node["minItems"]:
            out.append(f"{path}: {len(value)} items, fewer than {node['minItems']}")
        if "maxItems" in node and len(value) > node["maxItems"]:
            out.append(f"{path}: {len(value)} items, more than {node['maxItems']}")
        if node.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in value]
            if len(set(seen)) != len(seen):
                out.append(f"{path}: items are not unique")
        if "items" in node:
            for i, item in enumerate(value):
                self._check(item, node["items"], f"{path}[{i}]", out)

    def _object(self, value: dict[str, Any], node: dict[str, Any], path: str,
                out: list[str]) -> None:
        for key in node.get("required", []):
            if key not in value:
                out.append(f"{path}: missing required property {key!r}")
        props: dict[str, Any] = node.get("properties", {})
        for key, sub in props.items():
            if key in value:
                self._check(value[key], sub, f"{path}.{key}", out)
        if node.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                out.append(f"{path}: properties not allowed: {extra}")


__all__ = ["SCHEMA_PATH", "Validator", "is_date_time", "load_schema"]
