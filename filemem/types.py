"""The protocol's shapes, as they cross module boundaries and reach callers (JSON-safe).

TypedDicts, so a result is still the plain ``dict`` the protocol defines (and the bridge
sends as it is), while mypy checks every place that builds or reads one.
"""

# no ``from __future__ import annotations`` here: a TypedDict turns each string annotation
# into a ForwardRef, compiling it, which cost every cold command a millisecond
from typing import Any, Literal, TypedDict

Track = Literal["user", "agent"]
Scope = Literal["user-global", "workspace"]


class ProtocolEntry(TypedDict):
    """One memory entry: the protocol's 14 fields, in the export envelope's key order."""

    id: str
    track: str
    scope: str
    workspaceKey: str
    agentKey: str
    text: str
    source: str
    tags: list[str]
    version: int
    createdAt: int
    updatedAt: int
    lastRecalled: int | None
    recallCount: int
    sessionId: str | None


class Usage(TypedDict):
    """One layer's budget: characters used of its limit."""

    track: str
    scope: str
    used: int
    limit: int


class AddResult(TypedDict):
    entry: ProtocolEntry
    usage: Usage


class ReplaceResult(TypedDict):
    previous: ProtocolEntry
    entry: ProtocolEntry
    usage: Usage


class ConsolidateResult(TypedDict):
    removed: list[ProtocolEntry]
    entry: ProtocolEntry
    usage: Usage


class SeedResult(TypedDict):
    added: int
    entries: list[ProtocolEntry]


WriteResult = AddResult | ReplaceResult | ConsolidateResult | SeedResult


SkipReason = Literal["in-memory", "repeated", "imported-before", "pending"]


class _Skipped(TypedDict):
    index: int  # its position in what the adapter read
    track: str
    scope: str
    workspaceKey: str
    agentKey: str
    text: str
    why: SkipReason


class SkippedEntry(_Skipped, total=False):
    """An entry an owner's import left out: the same text is in the same layer already
    (``why``: ``in-memory``), or earlier in the same import (``repeated``), or the adapter
    imported this very memory in this very version before and it was changed in filemem
    since (``imported-before``), or a pending approval waits to add it (``pending``, with
    that approval's ``pendingId``)."""

    pendingId: str


class OwnerImportResult(TypedDict):
    """An owner's import: the seed's result (``added`` 0 and no ``entries`` when everything
    was skipped: nothing was written or asked), and what was skipped."""

    added: int
    entries: list[ProtocolEntry]
    skipped: list[SkippedEntry]


class Place(TypedDict):
    """A layer holding entries that contain a match which was not found where it was
    looked for (ENTRY_NOT_FOUND's ``details.elsewhere``): the track/scope, the workspace
    (``None`` for user-global), the agent layer (``''``: the shared one), and how many."""

    track: str
    scope: str
    workspaceKey: str | None
    agentKey: str
    entries: int


class QueryResult(TypedDict):
    entries: list[ProtocolEntry]
    total: int
    truncated: bool


class _PayloadFields(TypedDict):
    action: str
    track: str
    scope: str
    text: str


class Payload(_PayloadFields, total=False):
    """What a person approves (approve what you see): the whole change in ``text``; a seed
    or an import has ``count`` and no ``source``."""

    source: str
    count: int


class AuditRow(TypedDict):
    """One audit row; ``seq`` and ``ts`` are stamped when the store records it."""

    seq: Any  # int once recorded
    ts: Any  # int once recorded (ms)
    action: str
    track: str | None
    scope: str | None
    entryId: str | None
    text: str | None
    outcome: str | None
    source: str | None
    sessionId: str | None


__all__ = ["AddResult", "AuditRow", "ConsolidateResult", "OwnerImportResult", "Payload", "Place",
           "ProtocolEntry", "QueryResult", "ReplaceResult", "Scope", "SeedResult",
           "SkipReason", "SkippedEntry", "Track", "Usage", "WriteResult"]
