"""Query: substring search with ASCII case folding, ranking by recall, a clamped limit.

Order: ``recallCount DESC, updatedAt DESC, id ASC``. ``total`` counts every match,
``truncated`` says the page is shorter than that. A query made for a session sees that
session's visible set only (shared + own agent; user-global + own workspace).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from filemem.jsstr import ascii_lower
from filemem.model import MAX_QUERY_LIMIT, Entry, visible


def positive_int(raw: Any) -> int | None:
    """``raw`` if it is a positive integer (``3.0`` counts: JSON has one number type)."""
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else None


def page_limit(raw: Any, default: int) -> int:
    """A positive integer limit capped at 1000; anything else gives the default."""
    return min(positive_int(raw) or default, MAX_QUERY_LIMIT)


def run(entries: Iterable[Entry], *, track: Any = None, scope: Any = None, text: Any = None,
        workspace_key: str | None = None, agent_key: str | None = None, limit: int,
        recall_count: Callable[[str], int]) -> tuple[list[Entry], int]:
    """(the page, total matches)."""
    needle = ascii_lower(text) if isinstance(text, str) and text else None
    # one pass per filter given, the text first (the most selective): a query for text
    # alone is one substring test per entry
    found = [e for e in entries if needle in e.fold] if needle is not None else list(entries)
    if track is not None or scope is not None:
        found = [e for e in found if (track is None or e.track == track)
                 and (scope is None or e.scope == scope)]
    if agent_key is not None or workspace_key is not None:
        found = [e for e in found if visible(e, workspace_key, agent_key)]

    def key(e: Entry) -> tuple[int, int, str]:
        return (-recall_count(e.id), -e.updated_at, e.id)

    if limit * 4 < len(found):
        page = heapq.nsmallest(limit, found, key=key)
    else:
        page = sorted(found, key=key)[:limit]
    return page, len(found)
