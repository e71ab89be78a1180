"""``remove``: delete the one entry a match resolves to."""

from __future__ import annotations

from typing import Any

from filemem.approval import Decision
from filemem.model import validate_object
from filemem.ops.base import (
    Changes,
    Core,
    Operation,
    Prepared,
    Replayed,
    RowRule,
    in_layer,
    layer,
    match_of,
    reresolve,
    search_for,
)
from filemem.session import Writer
from filemem.store.auditlog import row
from filemem.store.transaction import Transaction
from filemem.types import AddResult, AuditRow, Payload


def _check(r: AuditRow, c: Changes) -> str | None:
    e = c.deleted.get(r["entryId"] or "")
    if e is None or e.text != r["text"]:
        return f"{r['action']} row for {r['entryId']}: no deleted file with that text"
    return None


def _replay(r: AuditRow, entries: Replayed, c: Changes) -> None:
    if r["entryId"]:
        entries.pop(r["entryId"], None)


REMOVED = RowRule(_check, _replay)  # an entry whose file is deleted, with the row's text


def prepare(core: Core, input: Any, w: Writer) -> Prepared:
    inp = validate_object(input)
    track, scope = layer(inp)
    match = match_of(inp.get("match"))
    search = search_for(inp, w, track, scope, match)
    state = core.checked()
    target = core.resolve(state, search)
    core.ensure_writable(state, [target])
    payload: Payload = {"action": "remove", "track": track, "scope": scope,
                        "text": target.text, "source": target.source}

    def apply(txn: Transaction, decision: Decision) -> AddResult:
        current = reresolve(txn.state, search, target, state)
        removed = core.protocol(current)
        txn.commit(deletes=[current], rows=[row(
            "remove", track=track, scope=scope, entry_id=current.id, text=current.text,
            outcome=decision.label, source=current.source, session_id=w.session_id)],
            subject=f"remove {track}/{scope}: {current.text}", body=current.text)
        return {"entry": removed, "usage": core.usage(txn.state, track, scope)}

    return Prepared(payload, apply, [target], match, state=state)


OP = Operation("remove", prepare, in_layer("Remove a memory entry from"),
               {"remove": REMOVED}, bridge_param="input")
