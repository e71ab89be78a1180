"""Protocol errors: a stable ``code``, an English ``message`` and JSON-safe ``details``.

Callers branch on ``code``; messages are part of the audit contract and stay English.
"""

from __future__ import annotations

from typing import Any

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


class ProtocolError(Exception):
    """A dsh-memory-protocol/v1 error. Nothing was changed when one is raised."""

    code: str
    message: str
    details: dict[str, Any]

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})

    def to_public(self) -> dict[str, Any]:
        """The reference's flat projection: ``{code, message, ...details}``."""
        return {"code": self.code, "message": self.message, **self.details}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def __repr__(self) -> str:
        return f"ProtocolError({self.code!r}, {self.message!r}, {self.details!r})"


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
    from .model import js_json

    if changed:
        message = (
            f"the entry in {track}/{scope} matching {js_json(match)} changed while approval was "
            "pending (it is no longer the entry that was approved); nothing was changed"
        )
    else:
        message = f"no entry in {track}/{scope} contains {js_json(match)}; nothing was changed"
    return ProtocolError(ENTRY_NOT_FOUND, message, {"track": track, "scope": scope, "match": match})


def ambiguous_match(track: str, scope: str, match: str, sample: list[str]) -> ProtocolError:
    from .model import js_json

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


def proposal_not_found(pid: str, status: str | None = None) -> ProtocolError:
    already = f" (already {status})" if status else ""
    return ProtocolError(
        PROPOSAL_NOT_FOUND,
        f'proposal "{pid}" is not a pending proposal{already}; nothing was changed',
        {"id": pid},
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
