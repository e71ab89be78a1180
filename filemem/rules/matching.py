"""Finding the entry a ``replace``/``remove``/``consolidate`` means: a unique substring.

A match hits an entry when the ASCII-folded text contains the ASCII-folded match and the
lower-cased text contains the lower-cased match (so ASCII compares without case, other
letters with case, CJK as is). Only the writer's visible set is searched, so an entry the
writer cannot see never makes a match ambiguous and its text never appears in an error.
"""

from __future__ import annotations

from collections.abc import Iterable

from filemem import errors
from filemem.jsstr import ascii_lower, excerpt
from filemem.model import Entry, visible

SAMPLE_CHARS = 200


def hits(entry: Entry, match: str, folded: str) -> bool:
    return folded in entry.fold and match.lower() in entry.text.lower()


def candidates(entries: Iterable[Entry], match: str, workspace_key: str | None,
               agent_key: str) -> list[Entry]:
    """Visible entries containing ``match``, by (createdAt, id)."""
    folded = ascii_lower(match)
    found = [e for e in entries
             if visible(e, workspace_key, agent_key) and hits(e, match, folded)]
    found.sort(key=lambda e: (e.created_at, e.id))
    return found


def resolve(entries: Iterable[Entry], track: str, scope: str, match: str,
            workspace_key: str | None, agent_key: str) -> Entry:
    """The one visible entry of the layer containing ``match``; ENTRY_NOT_FOUND or
    AMBIGUOUS_MATCH (with every candidate's excerpt) otherwise."""
    found = candidates(entries, match, workspace_key, agent_key)
    if not found:
        raise errors.entry_not_found(track, scope, match)
    if len(found) > 1:
        raise errors.ambiguous_match(track, scope, match,
                                     [excerpt(e.text, SAMPLE_CHARS) for e in found])
    return found[0]
