"""What the tools answer: structured results (with the models their output schemas come
from) and tool errors a model can branch on - the protocol code, the details, and a hint."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final, Literal

from mcp import MCPError
from mcp_types import INTERNAL_ERROR, CallToolResult, TextContent
from pydantic import BaseModel

from filemem import errors

log = logging.getLogger("filemem.mcp")

Track = Literal["user", "agent"]
Scope = Literal["user-global", "workspace"]


_HINTS: Final = {
    errors.BUDGET_EXCEEDED: "The layer is full. Free room with memory_consolidate (merge related "
                            "entries into one shorter text) or memory_remove (drop stale ones) in "
                            "the same track/scope, then retry this write.",
    errors.AMBIGUOUS_MATCH: "Several entries contain the match (see details.sample). Retry with a "
                            "longer substring that occurs in exactly one entry.",
    errors.ENTRY_NOT_FOUND: "No entry you can see in that track/scope contains the match. If "
                            "details.elsewhere names another track/scope you can see, retry "
                            "there; else run memory_query to find the exact text and its "
                            "track/scope.",
    errors.INVALID_INPUT: "Fix the arguments as the message says and retry.",
    errors.STORE_CORRUPT: "The memory store needs a repair only the user can make: give them "
                          "this message as it is (it names the file, the commit that brought "
                          "it and the command that undoes it). Memory tools fail until it is "
                          "mended; do not retry, and do not edit the store's files yourself.",
    errors.STORE_UNSUPPORTED_VERSION: "This filemem is older than the store; tell the user.",
    errors.NO_STORE: "The memory store cannot be opened; tell the user. Do not retry.",
    errors.STORE_EXISTS: "The memory store cannot be opened; tell the user. Do not retry.",
    errors.STORE_BUSY: "Another program is using the memory store right now. Retry in a "
                       "little while; nothing was written.",
    errors.STORE_FULL: "The disk holding the memory store is full; nothing was written. Tell "
                       "the user; do not retry until they have freed space.",
    errors.STORE_READ_ONLY: "The memory store is read-only here: reads work, writes cannot. "
                            "Tell the user; do not retry.",
    errors.GIT_OPERATION_IN_PROGRESS: "The user's memory store is in the middle of a git "
                                      "merge, rebase or similar (see the message), so no "
                                      "memory can be written until they finish or abort it; "
                                      "nothing was written. Reading still works. Tell the "
                                      "user; do not retry until they have.",
}
_DENIED_HINTS: Final = {
    "rejected": "The user declined this write. Do not retry it unless they ask you to.",
    "cancelled": "The user dismissed the approval prompt. Ask them in the conversation before "
                 "trying again.",
    "pending": "Nobody could be asked here, so the write waits for the user's review "
               "(`filemem pending`). It is not in memory; do not retry it.",
    "unavailable": "Nobody could approve the write; it is not in memory.",
}


def _hint(code: str, details: Mapping[str, Any]) -> str | None:
    if code == errors.WRITE_DENIED:
        return _DENIED_HINTS.get(str(details.get("outcome")),
                                 "The write was not approved; nothing was written.")
    return _HINTS.get(code)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ok_result(structured: dict[str, Any]) -> CallToolResult:
    """JSON in structuredContent, the same JSON as text for clients that read only text."""
    return CallToolResult(content=[TextContent(type="text", text=_json(structured))],
                          structured_content=structured)


def error_result(action: str, code: str, message: str,
                 details: Mapping[str, Any] | None = None) -> CallToolResult:
    """A tool error (isError) a model can branch on: the protocol code, the details, and
    what to do next."""
    error: dict[str, Any] = {"code": code, "message": message, "details": dict(details or {})}
    hint = _hint(code, error["details"])
    if hint:
        error["hint"] = hint
    structured = {"action": action, "ok": False, "error": error}
    return CallToolResult(content=[TextContent(type="text", text=_json(structured))],
                          structured_content=structured, is_error=True)


def failure(action: str, exc: BaseException) -> CallToolResult:
    if isinstance(exc, errors.FilememError):
        return error_result(action, exc.code, exc.message, exc.details)
    if isinstance(exc, (FileExistsError, PermissionError)):
        return error_result(action, errors.NO_STORE, str(exc))
    log.error("filemem mcp: memory_%s failed", action, exc_info=exc)
    return error_result(action, "INTERNAL_ERROR", f"memory {action} failed: {exc}")


def request_error(what: str, exc: BaseException) -> MCPError:
    """A failure of a request that has no tool result to carry it (``resources/read``,
    ``prompts/get``): a JSON-RPC error whose message says what failed and why, and whose
    data has the protocol code, the details and the hint a tool error would carry."""
    if isinstance(exc, errors.FilememError):
        code, message, details = exc.code, exc.message, dict(exc.details)
    elif isinstance(exc, (FileExistsError, PermissionError)):
        code, message, details = errors.NO_STORE, str(exc), {}
    else:
        log.error("filemem mcp: %s failed", what, exc_info=exc)
        code, message, details = "INTERNAL_ERROR", str(exc), {}
    data: dict[str, Any] = {"code": code, "details": details}
    hint = _hint(code, details)
    if hint:
        data["hint"] = hint
    return MCPError(INTERNAL_ERROR, f"{what} failed: {code}: {message}", data)


def entry_out(e: Mapping[str, Any]) -> dict[str, Any]:
    """The reference memory tool's projection of an entry."""
    return {k: e[k] for k in ("id", "track", "scope", "text", "source", "tags")}


class EntryOut(BaseModel):
    id: str
    track: Track
    scope: Scope
    text: str
    source: str
    tags: list[str]


class UsageOut(BaseModel):
    track: Track
    scope: Scope
    used: int
    limit: int


class PreviousOut(BaseModel):
    id: str
    text: str


class ToolError(BaseModel):
    """An error result's ``error``: the protocol code, details, and what to do next."""

    code: str
    message: str
    details: dict[str, Any]
    hint: str | None = None


# Every tool result is one object: ``ok`` true with the action's fields, or ``ok`` false
# with ``error``. The declared output schema admits both (the fields of the one absent are
# optional), because clients validate an error result's structuredContent too (the
# TypeScript SDK does, and rejected error results that lacked `entry` and `usage`).


class _Result(BaseModel):
    """What every tool result has: ``ok``, and ``error`` when it is false."""

    ok: bool
    error: ToolError | None = None


class AddResult(_Result):
    action: Literal["add"]
    entry: EntryOut | None = None
    usage: UsageOut | None = None


class ReplaceResult(_Result):
    action: Literal["replace"]
    entry: EntryOut | None = None
    previous: PreviousOut | None = None
    usage: UsageOut | None = None


class RemoveResult(_Result):
    action: Literal["remove"]
    entry: EntryOut | None = None
    usage: UsageOut | None = None


class ConsolidateResult(_Result):
    action: Literal["consolidate"]
    entry: EntryOut | None = None
    removed: list[PreviousOut] | None = None
    usage: UsageOut | None = None


class QueryResult(_Result):
    action: Literal["query"]
    entries: list[EntryOut] | None = None
    total: int | None = None
    truncated: bool | None = None


class BudgetsResult(_Result):
    action: Literal["budgets"]
    budgets: list[UsageOut] | None = None


def shape(action: str, result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"action": action, "ok": True, "entry": entry_out(result["entry"])}
    if action == "replace":
        out["previous"] = {"id": result["previous"]["id"], "text": result["previous"]["text"]}
    if action == "consolidate":
        out["removed"] = [{"id": r["id"], "text": r["text"]} for r in result["removed"]]
    out["usage"] = result["usage"]
    return out


