"""What every write operation is made of, and the pieces they share.

An :class:`Operation` is one write described once: ``prepare`` validates the input,
resolves the target(s) in the writer's visible set, pre-checks the budget and returns a
:class:`Prepared` (the approve-what-you-see payload, and ``apply``, which re-checks under the
store lock and makes the one commit with its audit rows); ``title`` is the first line a
person reads when asked; ``rows`` say how ``filemem verify`` checks and replays each audit
action its commits carry; ``bridge_param`` names its input in a bridge request. The
provider's pipeline, ``plan``, pending approvals, ``verify``, the bridge and the MCP server
all read these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from filemem import errors
from filemem.approval import Decision
from filemem.config import Config
from filemem.jsstr import utf16_len
from filemem.model import (
    DEFAULT_SOURCE,
    Entry,
    new_id,
    normalize_tags,
    now_ms,
    validate_layer,
    validate_meta,
    validate_object,
    validate_optional_str,
    validate_text,
)
from filemem.rules import budgets, matching
from filemem.session import Writer
from filemem.store.core import Store
from filemem.store.state import State
from filemem.store.transaction import Transaction
from filemem.types import AuditRow, Payload, ProtocolEntry, Usage

Apply = Callable[[Transaction, Decision], Any]


class Prepared(NamedTuple):
    """A write checked up to its approval step: what to ask, and what to do once allowed.
    ``targets`` are the entries it changes (id and version are what the person approved);
    ``match`` names them in an error."""

    payload: Payload
    apply: Apply
    targets: Sequence[Entry] = ()
    match: str = ""
    texts: tuple[str, ...] = ()  # the new texts it would store: what the checks scan
    state: State | None = None  # the view it was prepared on: its configuration decides


class Core(NamedTuple):
    """What an operation may use of the provider: the store's view of HEAD, the effective
    configuration (the store's, with this process's overrides), the recall counters."""

    store: Store
    config: Callable[[State], Config]
    reveal: bool = False  # a match not found may be named in layers the writer cannot see

    def checked(self) -> State:
        """The validated state a write starts from; refused first (before the budget
        pre-check, before anyone is asked) while a git merge, rebase, ... is unfinished in
        the store."""
        self.store.refuse_unfinished_git()
        return self.store.checked()

    def resolve(self, state: State, search: matching.Search) -> Entry:
        """The one entry ``search`` finds at ``state`` (see :func:`matching.resolve`)."""
        return matching.resolve(state.layer(search.track, search.scope), search,
                                everywhere=state.entries.values(), reveal=self.reveal)

    def protocol(self, e: Entry) -> ProtocolEntry:
        return self.store.recall.protocol(e)

    def usage(self, state: State, track: str, scope: str) -> Usage:
        return budgets.row(state.usage, self.config(state), track, scope)

    def check_budget(self, state: State, track: str, scope: str, addition: int) -> None:
        budgets.check(state.usage, self.config(state), track, scope, addition)

    def ensure_writable(self, state: State, targets: list[Entry],
                        new: list[NewEntry] | None = None) -> None:
        """Refuse before asking what the commit would refuse after: a target with a
        person's uncommitted edit, a symlinked folder, git's index locked."""
        self.store.precheck(state, targets, [(s.track, s.scope, s.workspace_key, s.agent_key)
                                             for s in new or []])


class Changes(NamedTuple):
    """What one commit did to entries, for ``verify``: by entry id."""

    added: dict[str, Entry]
    modified: dict[str, tuple[Entry, Entry]]  # id -> (before, after)
    deleted: dict[str, Entry]


Replayed = dict[str, tuple[str, int]]  # entry id -> (text, version) the history produced


class RowRule(NamedTuple):
    """How ``verify`` checks one audit action against its commit (a problem, or None) and
    replays it onto the entries the history has produced so far."""

    check: Callable[[AuditRow, Changes], str | None]
    replay: Callable[[AuditRow, Replayed, Changes], None]


class Operation(NamedTuple):
    name: str  # the Provider method, and what a pending approval records
    prepare: Callable[[Core, Any, Writer], Prepared]
    title: Callable[[Payload], str]
    rows: Mapping[str, RowRule]
    bridge_param: str | None = None  # the bridge method of the same name takes this param


# ---------------------------------------------------------------- input rules


class NewEntry(NamedTuple):
    """An entry about to be made: its layer, text and keys (id and times come at commit)."""

    track: str
    scope: str
    text: str
    tags: tuple[str, ...]
    source: str
    workspace_key: str
    agent_key: str
    meta: tuple[tuple[str, str], ...] = ()  # another tool's data for the file (imports only)

    @property
    def size(self) -> int:
        return utf16_len(self.text)

    def make(self, w: Writer, ts: int, entry_id: str | None = None) -> Entry:
        """The entry, with a new id (``entry_id``: one from :func:`filemem.model.new_ids`)."""
        return Entry(id=entry_id or new_id(), track=self.track, scope=self.scope,
                     workspace_key=self.workspace_key, agent_key=self.agent_key,
                     text=self.text, source=self.source, tags=self.tags, version=1,
                     created_at=ts, updated_at=ts, session_id=w.session_id, meta=self.meta)


def layer(inp: dict[str, Any]) -> tuple[str, str]:
    return validate_layer(inp.get("track"), inp.get("scope"), track_missing="track" not in inp,
                          scope_missing="scope" not in inp)


def match_of(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise errors.invalid_input("replace/remove match must be a non-empty string")
    return value


def source_of(inp: dict[str, Any]) -> str:
    """``input.source``, with ``''`` treated as missing (the default label is used)."""
    return validate_optional_str(inp.get("source"), "source") or DEFAULT_SOURCE


def new_entry(inp: Any, w: Writer, *, with_meta: bool = False) -> NewEntry:
    """A new entry from an input. ``with_meta`` (an import) also takes ``meta``: another
    tool's data kept in the entry's file as ``x-<name>`` keys (an adapter's round-trip
    metadata); other writes ignore it, like any key the protocol does not define."""
    inp = validate_object(inp)
    track, scope = layer(inp)
    text = validate_text(inp.get("text"))
    tags = normalize_tags(inp.get("tags"))
    source = source_of(inp)
    wk = validate_optional_str(inp.get("workspaceKey"), "workspaceKey")
    ak = validate_optional_str(inp.get("agentKey"), "agentKey")
    return NewEntry(
        track, scope, text, tuple(tags), source,
        "" if scope == "user-global" else (w.workspace_key if wk is None else wk),
        w.agent_key if ak is None else ak,
        validate_meta(inp.get("meta")) if with_meta else (),
    )


def search_for(inp: dict[str, Any], w: Writer, track: str, scope: str,
               match: str) -> matching.Search:
    """What ``match`` is looked for in: the writer's visible part of ``track/scope``; a
    non-empty explicit key of the input, else the session's, picks the workspace and agent."""
    wk = inp.get("workspaceKey")
    ak = inp.get("agentKey")
    workspace = wk if isinstance(wk, str) and wk else w.workspace_key
    agent = ak if isinstance(ak, str) and ak else w.agent_key
    return matching.Search(track, scope, match, workspace if scope == "workspace" else None,
                           agent, workspace)


def created_at(state: State, count: int = 1) -> int:
    """The createdAt of the first of ``count`` new entries (the rest take the next
    milliseconds): now, or just after the newest entry if that is later, so that a write
    never sorts before an earlier one (a seed's last entries can be ahead of the clock)."""
    return max(now_ms() - count + 1, state.newest_created() + 1)


def reresolve(state: State, search: matching.Search, approved: Entry,
              prepared_on: State | None = None) -> Entry:
    """After approval: the same visible set must still resolve to the approved entry. On
    the very view it was resolved on (``prepared_on``: HEAD did not move) it does."""
    if state is prepared_on:
        return approved
    found = matching.candidates(state.layer(search.track, search.scope), search.match,
                                search.workspace_key, search.agent_key)
    if len(found) > 1:
        raise matching.ambiguous(search, found)
    if not found or found[0].id != approved.id or found[0].version != approved.version:
        raise errors.entry_not_found(search.track, search.scope, search.match, changed=True,
                                     workspace_key=search.workspace_key,
                                     agent_key=search.agent_key)
    return found[0]


def in_layer(verb: str) -> Callable[[Payload], str]:
    """A title for a write in one layer: ``"<verb> user/workspace:"``."""
    return lambda p: f"{verb} {p['track']}/{p['scope']}:"


__all__ = ["Changes", "Core", "NewEntry", "Operation", "Prepared", "Replayed", "RowRule"]
