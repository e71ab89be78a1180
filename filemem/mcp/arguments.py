"""Tool arguments that do not fit a tool's input schema, said so a model can fix them.

The SDK validates a call's arguments against the tool's input schema before anything runs;
its own report is pydantic's multi-line text. Here each problem becomes one clause naming the
argument and what it takes (read from the same input schema the client was given), and the
call answers an ``INVALID_INPUT`` tool error like every other bad input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from filemem.shown import visible

_GOT_CHARS: Final = 40  # how much of a rejected value is quoted back


def expects(schema: Mapping[str, Any]) -> str:
    """What a JSON Schema (of one argument) admits, in words: 'one of "user", "agent"'."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        given = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        said = " or ".join(expects(o) for o in given) or "a value"
        return said + (", or left out" if len(given) < len(options) else "")
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return "a string"
    if kind == "integer":
        low = schema.get("minimum")
        return "a whole number" + (f" of at least {low}" if low is not None else "")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = schema.get("items")
        of = _plural(expects(items)) if isinstance(items, Mapping) else "values"
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None and high is not None:
            return f"a list of {low} to {high} {of}"
        if low is not None:
            return f"a list of at least {low} {of}"
        return f"a list of {of}"
    if kind == "object":
        return "an object"
    return "a valid value"


def _plural(said: str) -> str:
    """'a string' -> 'strings' (the few shapes ``expects`` produces for list items)."""
    if said.startswith("a "):
        return said[2:] + "s"
    return "values that are " + said


def _got(value: Any) -> str:
    """A rejected value as the model sent it: JSON, shown (no control character acts on a
    screen that displays the error) and cut short."""
    try:
        text = visible(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        text = visible(repr(value))
    return text if len(text) <= _GOT_CHARS else text[:_GOT_CHARS - 1] + "\u2026"


def _where(loc: Sequence[Any]) -> str:
    name = str(loc[0]) if loc else "arguments"
    rest = [p for p in loc[1:] if isinstance(p, int)]
    return f"item {rest[0]} of `{name}`" if rest else f"`{name}`"


def _schema_at(properties: Mapping[str, Any], loc: Sequence[Any]) -> Mapping[str, Any]:
    """The schema of the argument (or list item) an error points at."""
    schema: Any = properties.get(str(loc[0]), {}) if loc else {}
    if len(loc) > 1 and isinstance(loc[1], int):
        options = schema.get("anyOf", [schema])
        arrays = [o for o in options if isinstance(o, Mapping) and o.get("type") == "array"]
        schema = arrays[0].get("items", {}) if arrays else {}
    return schema if isinstance(schema, Mapping) else {}


def problems(tool: str, input_schema: Mapping[str, Any], exc: ValidationError
             ) -> tuple[str, dict[str, Any]]:
    """The one-sentence message and the details of an argument validation failure."""
    properties = input_schema.get("properties", {})
    clauses: list[str] = []
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        where = _where(loc)
        if where in seen:  # one clause per argument (a union reports each arm)
            continue
        seen.add(where)
        wanted = expects(_schema_at(properties, loc))
        name = str(loc[0]) if loc else ""
        if error.get("type") == "missing":
            clauses.append(f"{where} is required ({wanted})")
            found.append({"argument": name, "expected": wanted, "missing": True})
        else:
            clauses.append(f"{where} must be {wanted} (got {_got(error.get('input'))})")
            found.append({"argument": name, "expected": wanted})
    allowed = ", ".join(f"`{n}`" for n in properties) or "none"
    message = (f"invalid arguments for {tool}: {'; '.join(clauses)}; fix them and call {tool} "
               f"again (its arguments: {allowed})")
    return message, {"tool": tool, "arguments": found}


__all__ = ["expects", "problems"]
