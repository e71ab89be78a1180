"""The memory tools as a model sees them, whatever carries them (``filemem mcp``'s tools,
the Hermes Agent plugin's): their names, the source they write as, their descriptions, what
each argument means, the sentence that says which arguments do not fit, the hint that tells a
model what to do after each error, and the JSON a result is (the reference memory tool's
projection of an entry). Defined once here, without the MCP SDK (``filemem snapshot`` and
the hooks name the tools too); the surfaces only wrap them in their own transport."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from filemem import errors
from filemem.shown import visible

TOOL_SOURCE: Final = "memory-tool"  # the reference memory tool's source label

# ---------------------------------------------------------------- names

WRITE_METHODS: Final = ("add", "replace", "remove", "consolidate")


def tool_name(method: str) -> str:
    """The tool that calls the Provider's ``method``."""
    return f"memory_{method}"


# the write tools, which the snapshot's first line tells the model to change memory with
WRITE_TOOL_NAMES: Final = tuple(tool_name(m) for m in WRITE_METHODS)


def unknown_tool(name: object, known: Iterable[str]) -> str:
    """The message for a call of a tool that is not there."""
    return f"unknown tool {name!r}; filemem's tools are {', '.join(known)}"


# ---------------------------------------------------------------- descriptions

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
    "WRITE_DENIED -> not written (outcome rejected/cancelled: the user, or their write policy "
    "when details.policy is off, said no, do not retry; pending: waiting for the user's "
    "review, do not retry).")

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


# ---------------------------------------------------------------- arguments that do not fit

_GOT_CHARS: Final = 40  # how much of a rejected value is quoted back


def expects(schema: Mapping[str, Any]) -> str:
    """What a JSON Schema (of one argument) admits, in words: 'one of "user", "agent"'."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        given = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        said = " or ".join(expects(o) for o in given) or "a value"
        return said + (", or left out" if len(given) < len(options) else "")
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return "a string"
    if kind == "integer":
        low = schema.get("minimum")
        return "a whole number" + (f" of at least {low}" if low is not None else "")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = schema.get("items")
        of = _plural(expects(items)) if isinstance(items, Mapping) else "values"
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None and high is not None:
            return f"a list of {low} to {high} {of}"
        if low is not None:
            return f"a list of at least {low} {of}"
        return f"a list of {of}"
    if kind == "object":
        return "an object"
    return "a valid value"


def _plural(said: str) -> str:
    """'a string' -> 'strings' (the few shapes ``expects`` produces for list items)."""
    if said.startswith("a "):
        return said[2:] + "s"
    return "values that are " + said


def _got(value: Any) -> str:
    """A rejected value as the model sent it: JSON, shown (no control character acts on a
    screen that displays the error) and cut short."""
    try:
        text = visible(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        text = visible(repr(value))
    return text if len(text) <= _GOT_CHARS else text[:_GOT_CHARS - 1] + "\u2026"


def _where(loc: Sequence[Any]) -> str:
    name = str(loc[0]) if loc else "arguments"
    rest = [p for p in loc[1:] if isinstance(p, int)]
    return f"item {rest[0]} of `{name}`" if rest else f"`{name}`"


def _schema_at(properties: Mapping[str, Any], loc: Sequence[Any]) -> Mapping[str, Any]:
    """The schema of the argument (or list item) a problem points at."""
    schema: Any = properties.get(str(loc[0]), {}) if loc else {}
    if len(loc) > 1 and isinstance(loc[1], int):
        options = schema.get("anyOf", [schema])
        arrays = [o for o in options if isinstance(o, Mapping) and o.get("type") == "array"]
        schema = arrays[0].get("items", {}) if arrays else {}
    return schema if isinstance(schema, Mapping) else {}


class ArgumentProblem(NamedTuple):
    """One argument that does not fit: where (its name, then an item's index in a list),
    and whether it is missing, not an argument of the tool at all, or the value given."""

    loc: tuple[Any, ...]
    missing: bool = False
    unknown: bool = False
    value: Any = None


def _fits(schema: Mapping[str, Any], value: Any) -> bool:
    """Whether ``value`` fits one argument's JSON Schema, as far as the memory tools' schemas
    go (``enum``, the types, a list's items and length, ``anyOf``)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        return any(_fits(o, value) for o in options if isinstance(o, Mapping))
    if "enum" in schema:
        return any(value == v and type(value) is type(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return value is None
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        low = schema.get("minimum")
        return isinstance(value, int) and not isinstance(value, bool) and (
            low is None or value >= low)
    if kind == "array":
        items = schema.get("items")
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        return isinstance(value, list) and low <= len(value) and (
            high is None or len(value) <= high) and (
            not isinstance(items, Mapping) or all(_fits(items, v) for v in value))
    return True


def argument_problems(input_schema: Mapping[str, Any], args: Mapping[str, Any]
                      ) -> list[ArgumentProblem]:
    """What in ``args`` does not fit the tool's input schema: arguments it does not take,
    required ones left out, values of the wrong kind (the checks the MCP SDK makes against
    the same schema, for a surface that has no SDK to make them: the Hermes plugin)."""
    properties = input_schema.get("properties", {})
    found = [ArgumentProblem((k,), unknown=True) for k in args if k not in properties]
    found += [ArgumentProblem((k,), missing=True) for k in input_schema.get("required", ())
              if args.get(k) is None]
    for key, value in args.items():
        schema = properties.get(key)
        if schema is None or value is None or _fits(schema, value):
            continue
        items = schema.get("items")
        if isinstance(value, list) and isinstance(items, Mapping) and \
                _fits({**schema, "items": {}}, value):  # a list of the right length: the items
            found += [ArgumentProblem((key, i), value=v) for i, v in enumerate(value)
                      if not _fits(items, v)]
        else:
            found.append(ArgumentProblem((key,), value=value))
    return found


def invalid_arguments(tool: str, input_schema: Mapping[str, Any],
                      found: Iterable[ArgumentProblem]) -> tuple[str, dict[str, Any]]:
    """The one-sentence INVALID_INPUT message and the details for arguments that do not fit
    the tool's input schema: one clause per argument, naming what it takes."""
    properties = input_schema.get("properties", {})
    clauses: list[str] = []
    said: list[dict[str, Any]] = []
    seen: set[str] = set()
    for problem in found:
        loc = problem.loc
        where = _where(loc)
        if where in seen:  # one clause per argument (a union reports each arm)
            continue
        seen.add(where)
        name = str(loc[0]) if loc else ""
        if problem.unknown:
            clauses.append(f"{where} is not one of its arguments")
            said.append({"argument": name, "unknown": True})
            continue
        wanted = expects(_schema_at(properties, loc))
        if problem.missing:
            clauses.append(f"{where} is required ({wanted})")
            said.append({"argument": name, "expected": wanted, "missing": True})
        else:
            clauses.append(f"{where} must be {wanted} (got {_got(problem.value)})")
            said.append({"argument": name, "expected": wanted})
    allowed = ", ".join(f"`{n}`" for n in properties) or "none"
    message = (f"invalid arguments for {tool}: {'; '.join(clauses)}; fix them and call {tool} "
               f"again (its arguments: {allowed})")
    return message, {"tool": tool, "arguments": said}


# ---------------------------------------------------------------- after an error

HINTS: Final = {
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
                          "this message as it is (it names what is wrong and the command that "
                          "mends it). Memory tools fail until it is mended; do not retry, and "
                          "do not edit the store's files or run git in it yourself.",
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


def refused_by_policy(key: Any) -> str:
    """The hint after a write policy of ``off`` refused a write (``key``: the writePolicies
    key that chose it, None for the global writePolicy): no person was asked."""
    setting = (f"`{visible(str(key))}: off` under writePolicies" if key
               else "`writePolicy: off`")
    return (f"The user's write policy refused this write ({setting} in their memory store's "
            "filemem.yaml); nobody was asked and nothing was written. Do not retry: no tool "
            "can change the policy. If the user wants this saved, tell them; they can change "
            "that setting in filemem.yaml and commit it.")


def hint(code: str, details: Mapping[str, Any]) -> str | None:
    """What a model should do after an error with this code (None: the message says it)."""
    if code == errors.WRITE_DENIED:
        if details.get("policy") == "off":
            return refused_by_policy(details.get("policyKey"))
        return DENIED_HINTS.get(str(details.get("outcome")),
                                "The write was not approved; nothing was written.")
    if code == errors.BUDGET_EXCEEDED and errors.grows_past_budget(details) is not None:
        return ("This text alone is longer than the whole budget of its track/scope: removing "
                "or consolidating entries cannot make room. Write a shorter text; if the user "
                "wants it whole, tell them: they can raise that budget in filemem.yaml.")
    return HINTS.get(code)


def tool_details(exc: errors.FilememError) -> dict[str, Any]:
    """A filemem error's details as a tool's ``error`` carries them: the protocol's, plus,
    for a write a policy of ``off`` refused, ``policy`` and ``policyKey`` (the protocol says
    only ``rejected``, as for a person's no)."""
    details = dict(exc.details)
    if isinstance(exc, errors.PolicyRefused):
        details.update(policy="off", policyKey=exc.policy_key)
    return details


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
