"""What the tools answer: structured results (with the models their output schemas come
from) and tool errors a model can branch on - the protocol code, the details, and a hint."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Literal

from mcp import MCPError
from mcp_types import INTERNAL_ERROR, CallToolResult, TextContent
from pydantic import BaseModel

from filemem import errors
from filemem.toolspec import entry_out, error_object, hint, shape, tool_details

log = logging.getLogger("filemem.mcp")

Track = Literal["user", "agent"]
Scope = Literal["user-global", "workspace"]


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
    structured = {"action": action, "ok": False, "error": error_object(code, message, details)}
    return CallToolResult(content=[TextContent(type="text", text=_json(structured))],
                          structured_content=structured, is_error=True)


def failure(action: str, exc: BaseException) -> CallToolResult:
    if isinstance(exc, errors.FilememError):
        return error_result(action, exc.code, exc.message, tool_details(exc))
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
    advice = hint(code, details)
    if advice:
        data["hint"] = advice
    return MCPError(INTERNAL_ERROR, f"{what} failed: {code}: {message}", data)


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


__all__ = ["entry_out", "error_result", "failure", "ok_result", "request_error", "shape"]
