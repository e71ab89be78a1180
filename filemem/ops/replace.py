"""``replace``: the one entry a match resolves to gets a new text (and version)."""

from __future__ import annotations

from typing import Any

from filemem.approval import Decision
from filemem.jsstr import utf16_len
from filemem.model import normalize_tags, now_ms, validate_object, validate_text
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
    source_of,
)
from filemem.session import Writer
from filemem.store.auditlog import row
from filemem.store.transaction import Transaction
from filemem.types import AuditRow, Payload, ReplaceResult


def _check(r: AuditRow, c: Changes) -> str | None:
    pair = c.modified.get(r["entryId"] or "")
    if pair is None or pair[1].text != r["text"] or pair[1].version != pair[0].version + 1:
        return (f"replace row for {r['entryId']}: the file does not change to that text at "
                "the next version")
    return None


def _replay(r: AuditRow, entries: Replayed, c: Changes) -> None:
    if r["entryId"]:
        _, version = entries.get(r["entryId"], ("", 0))
        entries[r["entryId"]] = (str(r["text"]), version + 1)


REPLACED = RowRule(_check, _replay)


def prepare(core: Core, input: Any, w: Writer) -> Prepared:
    inp = validate_object(input)
    track, scope = layer(inp)
    text = validate_text(inp.get("text"))
    raw_tags = inp.get("tags")
    tags = None if raw_tags is None else tuple(normalize_tags(raw_tags))
    source = source_of(inp)
    match = match_of(inp.get("match"))
    search = search_for(inp, w, track, scope, match)
    state = core.checked()
    target = core.resolve(state, search)
    core.check_budget(state, track, scope, utf16_len(text) - target.size)
    core.ensure_writable(state, [target])
    payload: Payload = {"action": "replace", "track": track, "scope": scope,
                        "text": f"from:\n{target.text}\n\nto:\n{text}",
                        "source": source}

    def apply(txn: Transaction, decision: Decision) -> ReplaceResult:
        st = txn.state
        current = reresolve(st, search, target, state)
        core.check_budget(st, track, scope, utf16_len(text) - current.size)
        new = current.revised(
            text=text, tags=current.tags if tags is None else tags,
            version=current.version + 1, updated_at=max(now_ms(), current.updated_at),
            session_id=w.session_id)
        previous = core.protocol(current)
        txn.commit(puts=[new], rows=[row(
            "replace", track=track, scope=scope, entry_id=new.id, text=text,
            outcome=decision.label, source=new.source, session_id=w.session_id)],
            subject=f"replace {track}/{scope}: {text}",
            body=f"from:\n{current.text}\n\nto:\n{text}")
        return {"previous": previous, "entry": core.protocol(new),
                "usage": core.usage(txn.state, track, scope)}

    return Prepared(payload, apply, [target], match, texts=(text,), state=state)


OP = Operation("replace", prepare, in_layer("Replace a memory entry in"),
               {"replace": REPLACED}, bridge_param="input")
