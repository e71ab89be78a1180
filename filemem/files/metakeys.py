"""The ``x-<name>`` keys of an entry file: other tools' metadata (schemas/entry-file.md).

filemem writes each as one line after the protocol fields, ``x-<name>: <JSON object>``,
sorted by key, with the characters some tools break lines at escaped (the JSON is also a
YAML flow mapping, so any YAML reader reads the same values). The entry keeps them as
``Entry.meta``: (key, JSON text) pairs. A file in another form (block YAML, comments) is
read through the guarded YAML reader, and its ``x-`` keys whose values are JSON objects
become the entry's metadata the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from filemem.model import Entry, meta_json, meta_problem

LINE_RE: Final = re.compile(r"(x-[a-z0-9][a-z0-9-]{0,62}): (\{.*\})\Z")
# YAML's printable set minus characters some tools treat as line breaks; the rest is escaped.
YAML_UNSAFE: Final = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")

Meta = tuple[tuple[str, str], ...]


def yaml_escaped(text: str) -> str:
    """JSON text with the characters YAML tools may break lines at as ``\\uXXXX``."""
    return YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def lines(entry: Entry) -> list[str]:
    """The entry's ``x-`` keys as filemem writes them: one line each."""
    return [f"{key}: {yaml_escaped(text)}" for key, text in entry.meta]


def parse_lines(found: list[str]) -> Meta | None:
    """The metadata of the lines after the protocol fields in filemem's own form; None if
    they are not exactly what filemem writes (the YAML reader decides then)."""
    meta: list[tuple[str, str]] = []
    for line in found:
        m = LINE_RE.match(line)
        if not m or (meta and m.group(1) <= meta[-1][0]):
            return None
        try:
            value = json.loads(m.group(2), parse_constant=_no_constant)
        except ValueError:
            return None
        if meta_problem(m.group(1), value) is not None:
            return None
        meta.append((m.group(1), meta_json(value)))
        if f"{meta[-1][0]}: {yaml_escaped(meta[-1][1])}" != line:
            return None
    return tuple(meta)


def from_yaml(data: dict[str, Any]) -> Meta:
    """The metadata of a front-matter read as YAML: its ``x-`` keys holding JSON objects
    (any other ``x-`` key is an ordinary key of the file's own)."""
    meta: list[tuple[str, str]] = []
    for key, value in data.items():
        if not isinstance(key, str) or not key.startswith("x-"):
            continue
        try:
            plain = _json_value(value)
        except ValueError:
            continue
        if meta_problem(key, plain) is None:
            meta.append((key, meta_json(plain)))
    return tuple(sorted(meta))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_value(value: Any) -> Any:
    """ruamel's round-trip value as plain JSON types; ValueError if it is not JSON."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # ruamel's ScalarInt, ScalarFloat, ... as plain values
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("a key that is not a string")
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    raise ValueError(f"{type(value).__name__} is not JSON")


__all__ = ["LINE_RE", "YAML_UNSAFE", "Meta", "from_yaml", "lines", "parse_lines",
           "yaml_escaped"]
