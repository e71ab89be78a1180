"""The ``memory-export-v1`` envelope: a whole-store backup other providers can read.

Export is read-only (no approval, no audit row, no recall bump) and valid against the
protocol's JSON Schema (``sessionId`` included). Import validates the whole envelope first
and reports problems as INVALID_INPUT; it accepts the reference implementation's exports
(which leave ``sessionId`` out).
"""

from __future__ import annotations

from typing import Any, Final

from filemem import errors
from filemem.model import (
    DEFAULT_SOURCE,
    LAYERS,
    check_batch,
    iso_ms,
    now_ms,
    parse_iso_ms,
    validate_protocol_entry,
)
from filemem.types import ProtocolEntry, Usage

PLUGIN: Final = "dsh-memento"
SCHEMA: Final = "memory-export-v1"


def build(entries: list[ProtocolEntry], budget_rows: list[Usage],
          exported_at: int | None = None) -> dict[str, Any]:
    return {
        "plugin": PLUGIN,
        "schema": SCHEMA,
        "exportedAt": iso_ms(now_ms() if exported_at is None else exported_at),
        "budgets": budget_rows,
        "entries": entries,
    }


def _bad(message: str) -> errors.ProtocolError:
    return errors.invalid_input(f"import: {message}; nothing was imported")


def validate(doc: Any) -> list[dict[str, Any]]:
    """Check an envelope; returns its entries (each a validated 14-field copy)."""
    if not isinstance(doc, dict) or doc.get("plugin") != PLUGIN or doc.get("schema") != SCHEMA:
        raise _bad(f'not a memory export document (expected plugin "{PLUGIN}" and schema '
                   f'"{SCHEMA}")')
    exported_at = doc.get("exportedAt")
    try:
        if not isinstance(exported_at, str):
            raise ValueError
        parse_iso_ms(exported_at)
    except ValueError:
        raise _bad("exportedAt must be an ISO-8601 date-time string") from None
    budgets = doc.get("budgets")
    if not isinstance(budgets, list):
        raise _bad("budgets must be an array of {track, scope, used, limit} rows")
    for i, b in enumerate(budgets):
        ok = isinstance(b, dict) and (b.get("track"), b.get("scope")) in LAYERS and all(
            isinstance(b.get(k), int) and not isinstance(b.get(k), bool) and b[k] >= 0
            for k in ("used", "limit"))
        if not ok:
            raise _bad(f"budgets[{i}] is not a valid {{track, scope, used, limit}} row")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _bad("entries must be an array")
    if not entries:
        raise _bad("the export document contains no entries")
    check_batch(len(entries), "import")  # before validating a huge document entry by entry
    out = []
    for i, e in enumerate(entries):
        if isinstance(e, dict) and e.get("source") == "":
            e = {**e, "source": DEFAULT_SOURCE}  # '' is "no source" (the reference can store it)
        try:
            out.append(validate_protocol_entry(e, require_session_id=False))
        except errors.ProtocolError as exc:
            raise _bad(f"entries[{i}]: {exc.message}") from None
    return out


def seed_inputs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an import writes: texts, layers, keys, sources and tags as they were (new ids,
    version 1, fresh timestamps, recall counts not carried over)."""
    return [{"track": e["track"], "scope": e["scope"], "text": e["text"], "source": e["source"],
             "workspaceKey": e["workspaceKey"], "agentKey": e["agentKey"], "tags": e["tags"]}
            for e in entries]
