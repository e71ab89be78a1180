"""``add``: one new entry in one layer."""

from __future__ import annotations

from typing import Any

from filemem.approval import Decision
from filemem.ops.base import (
    Changes,
    Core,
    Operation,
    Prepared,
    Replayed,
    RowRule,
    created_at,
    in_layer,
)
from filemem.ops.base import new_entry as parse_new
from filemem.session import Writer
from filemem.store.auditlog import row
from filemem.store.transaction import Transaction
from filemem.types import AddResult, AuditRow, Payload


def _check(r: AuditRow, c: Changes) -> str | None:
    e = c.added.get(r["entryId"] or "")
    if e is None or e.text != r["text"] or e.version != 1:
        return f"{r['action']} row for {r['entryId']}: no new version-1 file with that text"
    return None


def _replay(r: AuditRow, entries: Replayed, c: Changes) -> None:
    if r["entryId"]:
        entries[r["entryId"]] = (str(r["text"]), 1)


ADDED = RowRule(_check, _replay)  # an entry that appears at version 1 with the row's text


def prepare(core: Core, input: Any, w: Writer) -> Prepared:
    spec = parse_new(input, w)
    state = core.checked()
    core.check_budget(state, spec.track, spec.scope, spec.size)
    core.ensure_writable(state, [], [spec])
    payload: Payload = {"action": "add", "track": spec.track, "scope": spec.scope,
                        "text": spec.text, "source": spec.source}

    def apply(txn: Transaction, decision: Decision) -> AddResult:
        st = txn.state
        core.check_budget(st, spec.track, spec.scope, spec.size)
        entry = spec.make(w, created_at(st))
        txn.commit(puts=[entry], rows=[row(
            "add", track=entry.track, scope=entry.scope, entry_id=entry.id, text=entry.text,
            outcome=decision.label, source=entry.source, session_id=w.session_id)],
            subject=f"add {entry.track}/{entry.scope}: {entry.text}", body=entry.text)
        return {"entry": core.protocol(entry),
                "usage": core.usage(txn.state, entry.track, entry.scope)}

    return Prepared(payload, apply, texts=(spec.text,), state=state)


OP = Operation("add", prepare, in_layer("Add a memory entry to"), {"add": ADDED},
               bridge_param="input")
