"""The memory tools as a model sees them, whatever carries them (``filemem mcp``'s tools,
the Hermes Agent plugin's): the source they write as, their descriptions, what each argument
means, the hint that tells a model what to do after each error, and the JSON a result is
(the reference memory tool's projection of an entry). Defined once here; the surfaces only
wrap them in their own transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from filemem import errors

TOOL_SOURCE: Final = "memory-tool"  # the reference memory tool's source label

TRACK_DOC: Final = ("user = about the person (preferences, communication style, things to "
                    "avoid); agent = about the work (environment facts, project conventions, "
                    "lessons learnt)")
SCOPE_DOC: Final = ("user-global = true in every workspace; workspace = true only in this "
                    "project (the session's workspace)")
TAGS_DOC: Final = "optional labels, at most 16 of at most 32 characters each"
MATCH_DOC: Final = ("a substring of the entry's text (case-insensitive for ASCII) that occurs "
                    "in exactly one entry you can see in that track/scope")

AFTER_WRITE: Final = (
    "The user may be asked to approve the write in the client (their write policy decides). "
    "If the result is an error, branch on error.code: BUDGET_EXCEEDED -> the track/scope is "
    "full: consolidate or remove entries there, then retry; AMBIGUOUS_MATCH -> retry with a "
    "longer substring unique to one entry; ENTRY_NOT_FOUND -> memory_query first; "
    "WRITE_DENIED -> not written (outcome rejected/cancelled: the user said no, do not retry; "
    "pending: waiting for the user's review, do not retry).")

ADD_DOC: Final = (
    "Save one durable fact to the user's long-term memory, shared with future sessions.\n"
    "SAVE: stable preferences and corrections the user states (\"always use pnpm\", \"reply in "
    "Chinese\"), facts about their environment, project conventions, and lessons learnt the "
    "hard way that will matter again.\n"
    "SKIP: anything temporary or task-specific (current bug, todo items, file contents), "
    "what the repo or git history already records, guesses, secrets or credentials, and "
    "anything already in memory (query first; update it with memory_replace instead).\n"
    "Pick track: user = about the person; agent = about the environment and the work. Pick "
    "scope: user-global = true everywhere; workspace = true only in this project. Write one "
    "short self-contained statement. " + AFTER_WRITE)
REPLACE_DOC: Final = (
    "Rewrite one existing memory entry (a fact changed, or is better said another way). "
    "`match` picks the entry by a substring unique within the track/scope you can see; `text` "
    "is its complete new text. The user sees the old and new text before approving. "
    + AFTER_WRITE)
REMOVE_DOC: Final = (
    "Delete one memory entry that is wrong or no longer true, picked by a `match` substring "
    "unique within the track/scope. The user sees the full text before approving. "
    + AFTER_WRITE)
CONSOLIDATE_DOC: Final = (
    "Merge several related memory entries of one track/scope into one new entry, in one "
    "approved change: each of `matches` removes exactly one entry, `text` is added. Use it to "
    "free budget (BUDGET_EXCEEDED) or to clean up duplicates. The user sees every entry "
    "removed and the new text. " + AFTER_WRITE)
QUERY_DOC: Final = (
    "Search the user's memory as this session sees it (shared entries and this agent's, "
    "user-global entries and this workspace's). Use it before saving (to avoid duplicates), "
    "to find the exact text for memory_replace/remove/consolidate, or when past preferences "
    "might matter. Read-only; needs no approval.")
BUDGETS_DOC: Final = (
    "Show how full each memory layer is: used/limit characters for user and agent track x "
    "user-global and workspace scope. Writes that would exceed a limit fail with "
    "BUDGET_EXCEEDED. Read-only.")


HINTS: Final = {
    errors.BUDGET_EXCEEDED: "The layer is full. Free room with memory_consolidate (merge related "
                            "entries into one shorter text) or memory_remove (drop stale ones) in "
                            "the same track/scope, then retry this write.",
    errors.AMBIGUOUS_MATCH: "Several entries contain the match (see details.sample). Retry with a "
                            "longer substring that occurs in exactly one entry.",
    errors.ENTRY_NOT_FOUND: "No entry you can see in that track/scope contains the match. Run "
                            "memory_query to find the exact text and its track/scope.",
    errors.INVALID_INPUT: "Fix the arguments as the message says and retry.",
    errors.STORE_CORRUPT: "The memory store needs repair; tell the user (`filemem status`). "
                          "Do not retry.",
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
DENIED_HINTS: Final = {
    "rejected": "The user declined this write. Do not retry it unless they ask you to.",
    "cancelled": "The user dismissed the approval prompt. Ask them in the conversation before "
                 "trying again.",
    "pending": "Nobody could be asked here, so the write waits for the user's review "
               "(`filemem pending`). It is not in memory; do not retry it.",
    "unavailable": "Nobody could approve the write; it is not in memory.",
}


def hint(code: str, details: Mapping[str, Any]) -> str | None:
    """What a model should do after an error with this code (None: the message says it)."""
    if code == errors.WRITE_DENIED:
        return DENIED_HINTS.get(str(details.get("outcome")),
                                "The write was not approved; nothing was written.")
    return HINTS.get(code)


def error_object(code: str, message: str, details: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
    """A failed tool call's ``error``: the protocol code, the details, and (when there is
    one) the hint saying what to do next."""
    error: dict[str, Any] = {"code": code, "message": message, "details": dict(details or {})}
    advice = hint(code, error["details"])
    if advice:
        error["hint"] = advice
    return error


def entry_out(e: Mapping[str, Any]) -> dict[str, Any]:
    """The reference memory tool's projection of an entry."""
    return {k: e[k] for k in ("id", "track", "scope", "text", "source", "tags")}


def shape(action: str, result: dict[str, Any]) -> dict[str, Any]:
    """A write's protocol result as the tool's result: ``ok``, the entry, what it replaced
    or removed, and the layer's usage."""
    out: dict[str, Any] = {"action": action, "ok": True, "entry": entry_out(result["entry"])}
    if action == "replace":
        out["previous"] = {"id": result["previous"]["id"], "text": result["previous"]["text"]}
    if action == "consolidate":
        out["removed"] = [{"id": r["id"], "text": r["text"]} for r in result["removed"]]
    out["usage"] = result["usage"]
    return out
