"""Every error filemem raises on purpose, under one root::

    FilememError              code, message, details; nothing was changed unless it says so
    ├── ProtocolError         a dsh-memory-protocol/v1 error (INVALID_INPUT ... ADAPTER_PAYLOAD)
    ├── StoreNotFound         no store at the path (NO_STORE)
    ├── StoreExists           ``init`` into a folder that is not empty (STORE_EXISTS)
    ├── StoreBusy             the store lock, git's index.lock or the branch's lock stays taken
    │                         (STORE_BUSY)
    ├── StoreFull             the disk (or quota) holding the store is full (STORE_FULL)
    ├── StoreReadOnly         a write to a store this process cannot write (STORE_READ_ONLY)
    └── SyncError             a remote or sync that cannot go on (NO_REMOTE, PUSH_REJECTED, ...)

Callers branch on the class or on ``code``; each surface maps them through one table of its
own (CLI exit codes, JSON-RPC codes, MCP tool errors). A damaged git repository (a missing or
unreadable object, a detached HEAD) is ``STORE_CORRUPT``: ``filemem.files.gitrepo``'s
``RepositoryDamaged``, a ProtocolError that names the object and the way out. Messages stay
English: they are part of the audit contract and other providers compare them.
"""

from __future__ import annotations

from typing import Any

from filemem.jsstr import js_json

INVALID_INPUT = "INVALID_INPUT"
WRITE_REQUIRES_AGENT = "WRITE_REQUIRES_AGENT"
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
ENTRY_NOT_FOUND = "ENTRY_NOT_FOUND"
AMBIGUOUS_MATCH = "AMBIGUOUS_MATCH"
WRITE_DENIED = "WRITE_DENIED"
PROPOSAL_NOT_FOUND = "PROPOSAL_NOT_FOUND"
STORE_CORRUPT = "STORE_CORRUPT"
STORE_UNSUPPORTED_VERSION = "STORE_UNSUPPORTED_VERSION"
ADAPTER_NOT_FOUND = "ADAPTER_NOT_FOUND"
ADAPTER_PAYLOAD = "ADAPTER_PAYLOAD"

CODES = (
    INVALID_INPUT,
    WRITE_REQUIRES_AGENT,
    BUDGET_EXCEEDED,
    ENTRY_NOT_FOUND,
    AMBIGUOUS_MATCH,
    WRITE_DENIED,
    PROPOSAL_NOT_FOUND,
    STORE_CORRUPT,
    STORE_UNSUPPORTED_VERSION,
    ADAPTER_NOT_FOUND,
    ADAPTER_PAYLOAD,
)


NO_STORE = "NO_STORE"
STORE_EXISTS = "STORE_EXISTS"
STORE_BUSY = "STORE_BUSY"
STORE_FULL = "STORE_FULL"
STORE_READ_ONLY = "STORE_READ_ONLY"


class FilememError(Exception):
    """The root of filemem's errors: a stable ``code``, an English ``message`` and JSON-safe
    ``details``."""

    code: str
    message: str
    details: dict[str, Any]

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r})"


class ProtocolError(FilememError):
    """A dsh-memory-protocol/v1 error. Nothing was changed when one is raised."""


class StoreNotFound(FilememError):
    """There is no filemem store at the path (``filemem init`` makes one)."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, NO_STORE, message)


class StoreExists(FilememError, FileExistsError):
    """A new store was asked for in a folder that exists and is not empty."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_EXISTS, message)


class StoreBusy(FilememError, TimeoutError):
    """Another process holds the store: its lock for too long, or git's ``index.lock``.
    Nothing was written; trying again later is the answer."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_BUSY, message)


class StoreFull(FilememError, OSError):
    """No space left for the store's files. Nothing half-written was given a real name: the
    store is as it was before the write; free some space and try again."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_FULL, message)


class StoreReadOnly(FilememError, PermissionError):
    """A write (or sync) to a store this process cannot write: a read-only mount, files
    owned by another user. Reads still work; nothing was written."""

    def __init__(self, root: str, detail: str) -> None:
        FilememError.__init__(
            self, STORE_READ_ONLY,
            f"the store at {root} is read-only ({detail}); reads work, but nothing can be "
            "written to it; nothing was written", {"path": root})


class SyncError(FilememError):
    """A remote or sync operation that cannot go on. The message says why and what to do;
    ``code`` is stable for scripts (NO_REMOTE, REMOTE_EXISTS, REMOTE_UNREACHABLE,
    REMOTE_NOT_A_STORE, REMOTE_INVALID, PUSH_REJECTED, REMOTE_BUSY, SYNC_BUSY, BAD_REMOTE,
    CONFIG_CONFLICT). Nothing in the local store was changed unless the message says so."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(code, message, details)


def invalid_input(message: str) -> ProtocolError:
    return ProtocolError(INVALID_INPUT, message)


def write_requires_agent() -> ProtocolError:
    return ProtocolError(
        WRITE_REQUIRES_AGENT,
        "memory write requires an owning agent session to route approval through; "
        "refuse rather than write unapproved",
    )


def budget_exceeded(track: str, scope: str, used: int, limit: int, needed: int) -> ProtocolError:
    return ProtocolError(
        BUDGET_EXCEEDED,
        f"memory budget exceeded: {track}/{scope} at {used}/{limit} chars, this write needs "
        f"{needed} chars; consolidate or remove entries, then retry",
        {"track": track, "scope": scope, "used": used, "limit": limit, "needed": needed},
    )


def entry_not_found(track: str, scope: str, match: str, *, changed: bool = False) -> ProtocolError:
    if changed:
        message = (
            f"the entry in {track}/{scope} matching {js_json(match)} changed while approval was "
            "pending (it is no longer the entry that was approved); nothing was changed"
        )
    else:
        message = f"no entry in {track}/{scope} contains {js_json(match)}; nothing was changed"
    return ProtocolError(ENTRY_NOT_FOUND, message, {"track": track, "scope": scope, "match": match})


def ambiguous_match(track: str, scope: str, match: str, sample: list[str]) -> ProtocolError:
    n = len(sample)
    return ProtocolError(
        AMBIGUOUS_MATCH,
        f"match {js_json(match)} is ambiguous in {track}/{scope}: {n} entries contain it; "
        "use a longer, unique substring",
        {"track": track, "scope": scope, "match": match, "candidates": n, "sample": sample},
    )


def write_denied(outcome: str, detail: str | None = None, **extra: Any) -> ProtocolError:
    suffix = f"; {detail}" if detail else ""
    return ProtocolError(
        WRITE_DENIED,
        f"memory write not approved (approval outcome: {outcome}{suffix}); nothing was written",
        {"outcome": outcome, **extra},
    )


def pending_not_found(pid: str) -> ProtocolError:
    return ProtocolError(
        PROPOSAL_NOT_FOUND,
        f'"{pid}" is not a pending approval (see `filemem pending`); nothing was changed',
        {"id": pid},
    )


def store_corrupt(path: str, reason: str) -> ProtocolError:
    return ProtocolError(
        STORE_CORRUPT, f"memory store file {path} is corrupt: {reason}", {"path": path}
    )


def store_unsupported_version(path: str, found: int, supported: int) -> ProtocolError:
    return ProtocolError(
        STORE_UNSUPPORTED_VERSION,
        f"memory store at {path} has schema version {found} > supported {supported}; "
        "upgrade filemem instead of downgrading",
        {"path": path},
    )
