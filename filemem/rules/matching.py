"""Finding the entry a ``replace``/``remove``/``consolidate`` means: a unique substring.

A match hits an entry when the ASCII-folded text contains the ASCII-folded match and the
lower-cased text contains the lower-cased match (so ASCII compares without case, other
letters with case, CJK as is). Only the writer's visible set is searched, so an entry the
writer cannot see never makes a match ambiguous and its text never appears in an error.

When nothing is found, the error says what was searched (the layer, the workspace, the
agent layers) and where else the match is: in the other layers the writer can see, or, for
the owner (``reveal``), anywhere in the store (another workspace, another agent's layer).
Where is told by layer and count, never by text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from filemem import errors
from filemem.jsstr import ascii_lower, excerpt
from filemem.model import Entry, visible
from filemem.types import Place

SAMPLE_CHARS = 200


class Search(NamedTuple):
    """What a match is looked for in: one track/scope, as one writer sees it.

    ``workspace_key`` is the workspace searched (``None`` for user-global: every workspace),
    ``agent_key`` the writer's agent (``''``: the shared layer only; else the shared layer and
    that agent's), ``home`` the writer's workspace (what it sees of the other layers)."""

    track: str
    scope: str
    match: str
    workspace_key: str | None
    agent_key: str
    home: str

    def sees(self, e: Entry) -> bool:
        """The writer sees ``e`` (in any layer)."""
        return visible(e, self.home, self.agent_key)

    def searched(self, e: Entry) -> bool:
        """``e`` is in the set this search looked at."""
        return (e.track == self.track and e.scope == self.scope
                and visible(e, self.workspace_key, self.agent_key))


def hits(entry: Entry, match: str, folded: str) -> bool:
    return folded in entry.fold and match.lower() in entry.text.lower()


def candidates(entries: Iterable[Entry], match: str, workspace_key: str | None,
               agent_key: str) -> list[Entry]:
    """Visible entries containing ``match``, by (createdAt, id)."""
    folded, lowered = ascii_lower(match), match.lower()
    # the cheap substring test first: most entries of a layer fail it
    found = [e for e in entries if folded in e.fold and visible(e, workspace_key, agent_key)
             and lowered in e.text.lower()]
    found.sort(key=lambda e: (e.created_at, e.id))
    return found


def elsewhere(everywhere: Iterable[Entry], search: Search, *, reveal: bool
              ) -> list[Place]:
    """The layers outside the searched set whose entries contain the match, with how many:
    those the writer sees, or every layer in the store with ``reveal`` (the owner)."""
    folded = ascii_lower(search.match)
    counts: dict[tuple[str, str, str, str], int] = {}
    for e in everywhere:
        if search.searched(e) or not (reveal or search.sees(e)) \
                or not hits(e, search.match, folded):
            continue
        key = (e.track, e.scope, e.workspace_key if e.scope == "workspace" else "", e.agent_key)
        counts[key] = counts.get(key, 0) + 1
    return [{"track": t, "scope": s, "workspaceKey": w if s == "workspace" else None,
             "agentKey": a, "entries": n}
            for (t, s, w, a), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def ambiguous(search: Search, found: list[Entry]) -> errors.ProtocolError:
    return errors.ambiguous_match(search.track, search.scope, search.match,
                                  [excerpt(e.text, SAMPLE_CHARS) for e in found],
                                  workspace_key=search.workspace_key,
                                  agent_key=search.agent_key)


def resolve(entries: Iterable[Entry], search: Search, *, everywhere: Iterable[Entry] = (),
            reveal: bool = False) -> Entry:
    """The one visible entry of the layer (``entries``) containing the match;
    ENTRY_NOT_FOUND (naming what was searched and where else, among ``everywhere``, the
    match is) or AMBIGUOUS_MATCH (with every candidate's excerpt) otherwise."""
    found = candidates(entries, search.match, search.workspace_key, search.agent_key)
    if not found:
        raise errors.entry_not_found(
            search.track, search.scope, search.match, workspace_key=search.workspace_key,
            agent_key=search.agent_key, elsewhere=elsewhere(everywhere, search, reveal=reveal))
    if len(found) > 1:
        raise ambiguous(search, found)
    return found[0]
