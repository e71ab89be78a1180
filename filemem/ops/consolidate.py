"""``consolidate``: several entries of one layer removed and one new entry added, in one
commit (to free budget or merge duplicates)."""

from __future__ import annotations

from typing import Any, Final

from filemem import errors
from filemem.approval import Decision
from filemem.jsstr import excerpt, utf16_len
from filemem.model import MAX_CONSOLIDATE, normalize_tags, validate_object, validate_text
from filemem.ops import add, remove
from filemem.ops.base import (
    Core,
    Operation,
    Prepared,
    created_at,
    in_layer,
    layer,
    new_entry,
    reresolve,
    search_for,
)
from filemem.session import Writer
from filemem.shown import counted
from filemem.store.auditlog import one_line, row
from filemem.store.transaction import Transaction
from filemem.types import AuditRow, ConsolidateResult, Payload

EXCERPT: Final = 300  # characters of each removed entry shown in the approval payload


def prepare(core: Core, input: Any, w: Writer) -> Prepared:
    inp = validate_object(input)
    track, scope = layer(inp)
    text = validate_text(inp.get("text"))
    tags = tuple(normalize_tags(inp.get("tags")))
    matches = inp.get("matches")
    if not isinstance(matches, list) or not 1 <= len(matches) <= MAX_CONSOLIDATE or any(
            not isinstance(m, str) or not m for m in matches):
        raise errors.invalid_input(
            f"consolidate matches must be an array of 1..{MAX_CONSOLIDATE} non-empty strings")
    spec = new_entry({**inp, "tags": list(tags)}, w)
    searches = [search_for(inp, w, track, scope, m) for m in matches]
    state = core.checked()
    targets = [core.resolve(state, q) for q in searches]
    seen: dict[str, int] = {}
    for i, t in enumerate(targets):
        if t.id in seen:
            raise errors.invalid_input(
                f"consolidate matches {seen[t.id] + 1} and {i + 1} find the same entry; "
                "give each entry exactly one match")
        seen[t.id] = i
    core.check_budget(state, track, scope, utf16_len(text) - sum(t.size for t in targets))
    core.ensure_writable(state, targets, [spec])
    plan = "\n".join([part for m, t in zip(matches, targets, strict=False)
                      for part in (f"remove: {m}", excerpt(t.text, EXCERPT))]
                     + [f"new text: {text}"])
    payload: Payload = {"action": "consolidate", "track": track, "scope": scope, "text": plan,
                        "source": spec.source}

    def apply(txn: Transaction, decision: Decision) -> ConsolidateResult:
        st = txn.state
        current = [reresolve(st, q, t, state)
                   for q, t in zip(searches, targets, strict=False)]
        core.check_budget(st, track, scope, utf16_len(text) - sum(t.size for t in current))
        entry = spec.make(w, created_at(st))
        removed = [core.protocol(t) for t in current]
        rows: list[AuditRow] = [
            row("consolidate-remove", track=track, scope=scope, entry_id=t.id, text=t.text,
                outcome=decision.label, source=t.source, session_id=w.session_id)
            for t in current]
        rows.append(row("consolidate-add", track=track, scope=scope, entry_id=entry.id,
                        text=entry.text, outcome=decision.label, source=entry.source,
                        session_id=w.session_id))
        body = "\n\n".join([f"removed:\n{t.text}" for t in current] + [f"new:\n{text}"])
        txn.commit(puts=[entry], deletes=current, rows=rows, body=body,
                   subject=f"consolidate {track}/{scope}: "
                           f"{counted(len(current), 'entry', 'entries')} into "
                           f"{one_line(text, 40)}")
        return {"removed": removed, "entry": core.protocol(entry),
                "usage": core.usage(txn.state, track, scope)}

    return Prepared(payload, apply, targets, ", ".join(matches), texts=(text,), state=state)


OP = Operation("consolidate", prepare, in_layer("Consolidate memory entries in"),
               {"consolidate-remove": remove.REMOVED, "consolidate-add": add.ADDED},
               bridge_param="input")
