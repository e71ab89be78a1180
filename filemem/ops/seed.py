"""``seed`` and ``import``: many new entries, one approval, one commit. ``import`` is the
same write for entries converted from another tool's memory (an adapter's output, or a
``memory-export-v1`` envelope), recorded and described as an import. An import's entry may
carry ``meta``, another tool's data for its file (``x-<name>`` keys: an adapter's round-trip
metadata); the protocol's own fields and rules are the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from filemem import errors
from filemem.approval import Decision
from filemem.model import DEFAULT_SOURCE, check_batch, new_ids
from filemem.ops.base import (
    Changes,
    Core,
    Operation,
    Prepared,
    Replayed,
    RowRule,
    created_at,
    new_entry,
)
from filemem.rules import budgets
from filemem.session import Writer
from filemem.shown import counted
from filemem.store.auditlog import row
from filemem.store.transaction import Transaction
from filemem.types import AuditRow, Payload, SeedResult


def _nothing(r: AuditRow, c: Changes) -> None:
    return None


def _no_replay(r: AuditRow, entries: Replayed, c: Changes) -> None:
    return None


SUMMARY = RowRule(_nothing, _no_replay)  # the batch's own row; each entry has an add row


def preparer(verb: str) -> Callable[[Core, Any, Writer], Prepared]:
    def prepare(core: Core, inputs: Any, w: Writer) -> Prepared:
        if not isinstance(inputs, list) or not inputs:
            raise errors.invalid_input("seed requires a non-empty entry list")
        check_batch(len(inputs), verb)
        specs = [new_entry(i, w, with_meta=verb == "import") for i in inputs]
        additions: dict[tuple[str, str], int] = {}
        for s in specs:
            additions[(s.track, s.scope)] = additions.get((s.track, s.scope), 0) + s.size
        state = core.checked()
        budgets.check_groups(state.usage, core.config(state), additions)
        core.ensure_writable(state, [], specs)
        summary = "\n".join(f"{s.track}/{s.scope}: {s.text}" for s in specs)
        payload: Payload = {"action": "seed", "track": "batch", "scope": "batch",
                            "text": summary, "count": len(specs)}

        def apply(txn: Transaction, decision: Decision) -> SeedResult:
            st = txn.state
            budgets.check_groups(st.usage, core.config(st), additions)
            # consecutive milliseconds: listings (createdAt, id) keep the batch's order
            ts = created_at(st, len(specs))
            ids = new_ids(len(specs))
            made = [s.make(w, ts + i, ids[i]) for i, s in enumerate(specs)]
            rows: list[AuditRow] = [row("seed", text=summary, outcome=decision.label,
                                        source=DEFAULT_SOURCE, session_id=w.session_id)]
            rows += [row("add", track=e.track, scope=e.scope, entry_id=e.id, text=e.text,
                         outcome=decision.label, source=e.source, session_id=w.session_id)
                     for e in made]
            txn.commit(puts=made, rows=rows,
                       subject=f"{verb} {counted(len(made), 'entry', 'entries')}",
                       body=summary)
            return {"added": len(made), "entries": [core.protocol(e) for e in made]}

        return Prepared(payload, apply, texts=tuple(s.text for s in specs), state=state)

    return prepare


def _title(p: Payload) -> str:
    count = p.get("count")
    entries = counted(count, "new memory entry", "new memory entries") \
        if isinstance(count, int) else f"{count} new memory entries"
    return f"Write {entries} in one commit:"


SEED = Operation("seed", preparer("seed"), _title, {"seed": SUMMARY}, bridge_param="inputs")
IMPORT = Operation("import", preparer("import"), _title, {"seed": SUMMARY})
