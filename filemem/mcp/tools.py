"""The six tools: the four writes described once each in a table (``WRITE_TOOLS``), from
which every write's tool function and its resolvers are generated, and the two reads."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

import anyio.to_thread
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, Resolve
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from filemem.mcp.gates import Approval
from filemem.mcp.results import (
    AddResult,
    BudgetsResult,
    ConsolidateResult,
    QueryResult,
    RemoveResult,
    ReplaceResult,
    Scope,
    Track,
    failure,
    ok_result,
)
from filemem.mcp.routing import Plan, ask, plan_write, resolve_session, write
from filemem.mcp.sessions import Session, service_of
from filemem.toolspec import (
    ADD_DOC,
    CONSOLIDATE_DOC,
    MATCH_DOC,
    REMOVE_DOC,
    REPLACE_DOC,
    SCOPE_DOC,
    TAGS_DOC,
    TOOL_SOURCE,
    TRACK_DOC,
    entry_out,
    tool_name,
)
from filemem.types import QueryResult as ProtocolQuery

TrackArg = Annotated[Track, Field(description=TRACK_DOC)]
ScopeArg = Annotated[Scope, Field(description=SCOPE_DOC)]
TagsArg = Annotated[list[str] | None, Field(description=TAGS_DOC)]
MatchArg = Annotated[str, Field(description=MATCH_DOC)]


# ---------------------------------------------------------------- the write tools

# Each write tool is one row below; its planner, asker and tool function are made from it.
# The SDK reads a tool's and a resolver's parameters with ``inspect.signature`` and
# ``typing.get_type_hints``, so the generated functions carry a real signature and real
# annotations (this module's own annotations are strings), and a name of their own: the
# tool's name titles its input schema, and a resolver's ``module:qualname`` keys its
# question in an input-required round trip.

_POS: Final = inspect.Parameter.POSITIONAL_OR_KEYWORD
_REQUIRED: Final = inspect.Parameter.empty

Input = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Arg:
    """One argument the model passes: its schema comes from ``annotation`` (a real type,
    ``Annotated`` with a pydantic ``Field``) and ``default``."""

    name: str
    annotation: Any
    default: Any = _REQUIRED


@dataclass(frozen=True)
class WriteTool:
    """One write tool: the Provider method it calls (also the result's ``action``), what
    the model passes and how that becomes the protocol input, and how it is listed."""

    method: str
    args: tuple[Arg, ...]
    to_input: Input
    title: str
    description: str
    annotations: ToolAnnotations
    result: type[BaseModel]

    @property
    def name(self) -> str:
        return tool_name(self.method)


def _layer(args: Mapping[str, Any]) -> dict[str, Any]:
    return {"track": args["track"], "scope": args["scope"]}


def _new_entry(args: Mapping[str, Any]) -> dict[str, Any]:
    """A layer, the new text (labelled as the memory tool's) and its tags when given."""
    inp = {**_layer(args), "text": args["text"], "source": TOOL_SOURCE}
    if args["tags"] is not None:
        inp["tags"] = args["tags"]
    return inp


def _and(base: Input, key: str) -> Input:
    """``base`` plus the argument ``key`` as it is."""
    return lambda args: {**base(args), key: args[key]}


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """A write tool: changes the store (closed world: one local repository)."""
    return ToolAnnotations(read_only_hint=False, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


_TRACK: Final = Arg("track", TrackArg, "user")
_SCOPE: Final = Arg("scope", ScopeArg, "workspace")
_TAGS: Final = Arg("tags", TagsArg, None)

WRITE_TOOLS: Final = (
    WriteTool(
        "add",
        (Arg("text", Annotated[str, Field(description="the fact, one self-contained statement")]),
         _TRACK, _SCOPE, _TAGS),
        _new_entry, "Save to memory", ADD_DOC,
        _writes(destructive=False, idempotent=False), AddResult),
    WriteTool(
        "replace",
        (Arg("match", MatchArg),
         Arg("text", Annotated[str, Field(description="the complete new text of that entry")]),
         _TRACK, _SCOPE,
         Arg("tags", Annotated[list[str] | None, Field(
             description=TAGS_DOC + "; omit to keep the entry's tags, [] to clear them")],
             None)),
        _and(_new_entry, "match"), "Rewrite a memory entry", REPLACE_DOC,
        _writes(destructive=True, idempotent=False), ReplaceResult),
    WriteTool(
        "remove",
        (Arg("match", MatchArg), _TRACK, _SCOPE),
        _and(_layer, "match"), "Remove a memory entry", REMOVE_DOC,
        _writes(destructive=True, idempotent=True), RemoveResult),
    WriteTool(
        "consolidate",
        (Arg("matches", Annotated[list[str], Field(
            min_length=1, max_length=20,
            description="1 to 20 substrings, each matching exactly one entry to merge (" +
                        MATCH_DOC + ")")]),
         Arg("text", Annotated[str, Field(
             description="the one new entry that replaces them all")]),
         _TRACK, _SCOPE, _TAGS),
        _and(_new_entry, "matches"), "Merge memory entries", CONSOLIDATE_DOC,
        _writes(destructive=True, idempotent=False), ConsolidateResult),
)


def _typed(fn: Callable[..., Any], name: str, params: list[inspect.Parameter],
           returns: Any) -> Callable[..., Any]:
    """Give a generated function its name, signature and (real) annotations."""
    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {**{p.name: p.annotation for p in params}, "return": returns}
    return fn


def tool_function(tool: WriteTool) -> Callable[..., Any]:
    """The tool function for one row, with its two resolvers: the planner takes the tool's
    arguments by name (and the session), the asker depends on the planner, and the tool
    body on both."""
    context = inspect.Parameter("ctx", _POS, annotation=Context[Any, Any])
    sessioned = inspect.Parameter("session", _POS,
                                  annotation=Annotated[Session, Resolve(resolve_session)])
    by_name = [inspect.Parameter(a.name, _POS, annotation=a.annotation) for a in tool.args]

    async def planner(ctx: Context[Any, Any], session: Session, **args: Any) -> Plan:
        return await plan_write(ctx, session, tool.method, tool.to_input(args))

    _typed(planner, f"_plan_{tool.method}", [context, sessioned, *by_name], Plan)

    async def asker(ctx: Context[Any, Any], plan: Plan) -> Elicit[Approval] | None:
        return ask(ctx, plan)

    planned = inspect.Parameter("plan", _POS, annotation=Annotated[Plan, Resolve(planner)])
    _typed(asker, f"_ask_{tool.method}", [context, planned], Elicit[Approval] | None)

    async def body(ctx: Context[Any, Any], plan: Plan, answer: ElicitationResult[Approval],
                   **args: Any) -> CallToolResult:
        return await write(ctx, tool.method, tool.to_input(args), plan, answer)

    answered = inspect.Parameter("answer", _POS, annotation=Annotated[
        ElicitationResult[Approval], Resolve(asker)])
    given = [inspect.Parameter(a.name, _POS, annotation=a.annotation, default=a.default)
             for a in tool.args]
    return _typed(body, tool.name, [context, planned, answered, *given],
                  Annotated[CallToolResult, tool.result])


# ---------------------------------------------------------------- the reads


async def memory_query(
    ctx: Context[Any, Any],
    session: Annotated[Session, Resolve(resolve_session)],
    text: Annotated[str | None, Field(
        description="a substring to look for (case-insensitive for ASCII); omit to list")] = None,
    track: Annotated[Track | None, Field(description="only this track; omit for both")] = None,
    scope: Annotated[Scope | None, Field(description="only this scope; omit for both")] = None,
    limit: Annotated[int | None, Field(
        ge=1, description="most entries to return (default 20; hard-capped at 1000)")] = None,
) -> Annotated[CallToolResult, QueryResult]:
    memory = service_of(ctx)
    filt: dict[str, Any] = {k: v for k, v in (("text", text), ("track", track),
                                              ("scope", scope), ("limit", limit))
                            if v is not None}
    opts = {"session": session.protocol(), "sessionId": session.id}

    def run() -> ProtocolQuery:
        return memory.provider().query(filt, opts)

    try:
        result = await anyio.to_thread.run_sync(run)
    except Exception as exc:
        return failure("query", exc)
    return ok_result({"action": "query", "ok": True,
                      "entries": [entry_out(e) for e in result["entries"]],
                      "total": result["total"], "truncated": result["truncated"]})


async def memory_budgets(ctx: Context[Any, Any]) -> Annotated[CallToolResult, BudgetsResult]:
    memory = service_of(ctx)
    try:
        rows = await anyio.to_thread.run_sync(lambda: memory.provider().budgets())
    except Exception as exc:
        return failure("budgets", exc)
    return ok_result({"action": "budgets", "ok": True, "budgets": rows})
