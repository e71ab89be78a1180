"""Query: substring search with ASCII case folding, ranking by recall, a clamped limit.

Order: ``recallCount DESC, updatedAt DESC, id ASC``. ``total`` counts every match,
``truncated`` says the page is shorter than that. A query made for a session sees that
session's visible set only (shared + own agent; user-global + own workspace).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable
from typing import Any, Final

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


_SEP: Final = "\0"  # between two entries' texts in a TextIndex
_FEW: Final = 32  # matches a TextIndex finds one by one before testing the rest in a loop


class TextIndex:
    """Entries' folded texts joined into one string, so that a text query over all of them
    is one ``str.find`` (C) for each entry it finds, where a test of each entry in Python
    took ~0.1 ms at 1,000 entries. Made once per view of HEAD, by the first query of it."""

    __slots__ = ("_entries", "_starts", "_text")

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._entries = list(entries)
        self._starts: list[int] = []
        at = 0
        for e in self._entries:
            self._starts.append(at)
            at += len(e.fold) + 1
        self._text = _SEP.join(e.fold for e in self._entries)

    def containing(self, needle: str) -> list[Entry]:
        """The entries whose folded text contains ``needle`` (not empty), in their order."""
        entries = self._entries
        if _SEP in needle:  # it could span two texts
            return [e for e in entries if needle in e.fold]
        text, starts, found = self._text, self._starts, []
        at = text.find(needle)
        while at >= 0:
            i = bisect.bisect_right(starts, at) - 1
            found.append(entries[i])
            if len(found) >= _FEW:  # a needle in most texts: the rest as quick one by one
                return found + [e for e in entries[i + 1:] if needle in e.fold]
            if i + 1 == len(entries):
                break
            at = text.find(needle, starts[i + 1])
        return found


def run(entries: Iterable[Entry], *, track: Any = None, scope: Any = None, text: Any = None,
        workspace_key: str | None = None, agent_key: str | None = None, limit: int,
        recall_count: Callable[[str], int],
        index: TextIndex | None = None) -> tuple[list[Entry], int]:
    """(the page, total matches). ``index``: the same ``entries`` as a :class:`TextIndex`."""
    needle = ascii_lower(text) if isinstance(text, str) and text else None
    # one pass per filter given, the text first (the most selective): a query for text
    # alone is one substring test per entry, or one search of the index
    if needle is None:
        found = list(entries)
    elif index is not None:
        found = index.containing(needle)
    else:
        found = [e for e in entries if needle in e.fold]
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
