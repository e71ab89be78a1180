"""``filemem mcp``: the MCP server agents (Claude Code, Hermes, Cursor, ...) use.

Every tool is a thin call into the one :class:`~filemem.provider.Provider`; nothing here
re-implements a protocol rule. What this module adds is what only an MCP server can know:

* **who is asking** - the session's workspace comes from the client's MCP roots when it
  offers them (else ``--workspace``, else the server's cwd) and its agent from ``--agent``.
  The model never passes workspace, agent or approval: no tool has such a parameter.
* **how a person approves** - under the ``ask`` policy each write is shown to the human in
  the client through MCP elicitation, with the full approve-what-you-see payload. The two
  protocol eras need two routes to the same guarantee (the write is exactly what was shown):

  - 2025-11-25 and older (handshake era): the server may send requests mid-call, so the
    provider's own approval gate asks with ``ctx.elicit`` at the moment the pipeline asks
    (after resolution and budget checks, before the lock) - the payload shown *is* the one
    being written, and the provider refuses if the target changed while the person looked.
  - 2026-07-28: a server cannot send requests mid-call; a tool call is answered with an
    input-required round trip instead. A resolver runs the provider's pipeline up to the
    approval step (`Provider.plan`: nothing is written or recorded) to learn the exact payload,
    and asks with ``Elicit``. On the retry the resolver runs again; the SDK discards the
    answer if the question (which contains the whole payload) changed, and asks again. The
    tool body then runs the real write with a gate that answers only for that same payload.

  A client that declared no elicitation capability cannot show a prompt, so the write is
  staged as a pending approval for the owner's CLI (``filemem pending``) - never written.
  No tool, argument or prompt lets the model approve, change the policy or see pending
  approvals.
* **the frozen snapshot** as a resource (and a prompt), rendered once per MCP session and
  recorded as a ``snapshot`` audit row byte-identical to what the client receives.

Nothing but protocol messages go to stdout (the SDK's stdio transport moves fd 1 aside).
The store is opened lazily, after ``initialize`` is answered, so start-up costs only the
imports.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
import os
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
)
from mcp_types import (
    CallToolResult,
    InputRequiredResult,
    ListRootsResult,
    Resource,
    TextContent,
    ToolAnnotations,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyUrl, BaseModel, Field

from . import __version__, approval, errors
from .approval import ApprovalRequest
from .location import resolve_store_path
from .provider import Provider, write_context

log = logging.getLogger("filemem.mcp")

SERVER_NAME: Final = "filemem"
SNAPSHOT_URI: Final = "filemem://snapshot"
TOOL_SOURCE: Final = "memory-tool"  # the reference memory tool's source label
GATE_NAME: Final = "MCP elicitation"
ROOTS_TIMEOUT: Final = 10.0  # seconds a client gets to answer roots/list before we fall back

Track = Literal["user", "agent"]
Scope = Literal["user-global", "workspace"]


# ---------------------------------------------------------------- what the human answers


class Approval(BaseModel):
    """The elicitation form: one explicit choice, no default, so a stray accept approves
    nothing by accident."""

    decision: Literal["approve", "decline"] = Field(
        title="Write this to memory?",
        description="approve: write exactly what is shown; decline: refuse, nothing is written",
    )


def _outcome(answer: Any) -> str:
    """An elicitation answer in the protocol's outcome vocabulary."""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        if isinstance(data, Approval) and data.decision == "approve":
            return approval.ALLOWED
        return "rejected"
    if isinstance(answer, CancelledElicitation):
        return "cancelled"
    return "rejected"  # declined


# ---------------------------------------------------------------- the approval gate

Approver = Callable[[ApprovalRequest], str]
_APPROVER: contextvars.ContextVar[Approver | None] = contextvars.ContextVar(
    "filemem_mcp_approver", default=None)


class ElicitationGate:
    """The provider's gate: hands each request to the approver of the tool call that made
    it (set per call, in the worker thread), so concurrent calls never answer each other."""

    name = GATE_NAME

    def __call__(self, request: ApprovalRequest) -> str:
        approver = _APPROVER.get()
        if approver is None:
            raise RuntimeError("no MCP tool call is waiting for this approval")
        return approver(request)


class _Refuse:
    """An approver that cannot answer: the gate fails closed and the provider stages the
    write as a pending approval, recording why."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __call__(self, request: ApprovalRequest) -> str:
        raise RuntimeError(self.why)


class _Bound:
    """2026-07-28: answers with the person's decision, but only for the payload they saw."""

    def __init__(self, shown: dict[str, Any], outcome: str) -> None:
        self.shown = shown
        self.outcome = outcome

    def __call__(self, request: ApprovalRequest) -> str:
        if request.payload != self.shown:
            raise RuntimeError("the memory changed after the person answered, so what would "
                               "be written is no longer what they were shown")
        return self.outcome


class _AskInCall:
    """2025-11-25 and older: ask the person now, from the provider's worker thread, with
    the very request the pipeline is about to act on."""

    def __init__(self, ctx: Context[Any, Any], message: Callable[[ApprovalRequest], str]):
        self.ctx = ctx
        self.message = message

    def __call__(self, request: ApprovalRequest) -> str:
        answer = anyio.from_thread.run(self.ctx.elicit, self.message(request), Approval)
        return _outcome(answer)


# ---------------------------------------------------------------- sessions


@dataclass(frozen=True)
class Session:
    """The session a call belongs to: what the provider needs to know who is writing."""

    id: str
    workspace: str
    agent: str | None

    def protocol(self) -> dict[str, Any]:
        header: dict[str, Any] = {"cwd": self.workspace}
        if self.agent is not None:
            header["agentPreset"] = self.agent
        return {"id": self.id, "header": header}

    def write(self) -> dict[str, Any]:
        return write_context(session_id=self.id, cwd=self.workspace, agent=self.agent)


@dataclass(frozen=True)
class _Known:
    """The roots resolver's plain answer: a workspace already known (or None: no usable
    root, use the fallback)."""

    workspace: str | None


def root_path(uri: str) -> str | None:
    """The local folder a ``file://`` root names (None for any other kind of root)."""
    from urllib.request import url2pathname  # heavy (http.client): only when a root comes

    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = url2pathname(parsed.path)
    if parsed.netloc and parsed.netloc != "localhost":
        path = f"//{parsed.netloc}{path}"  # a UNC share
    return path or None


def _roots_workspace(result: ListRootsResult) -> str | None:
    """The first local root: clients list the project they were started for first."""
    for root in result.roots:
        path = root_path(str(root.uri))
        if path:
            return path
    return None


def is_modern(protocol_version: str | None) -> bool:
    """True when the server cannot send requests mid-call (2026-07-28 and later)."""
    return protocol_version is not None and protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS


def can_elicit(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}`` counts)."""
    caps = ctx.client_capabilities
    e = caps.elicitation if caps is not None else None
    return e is not None and (e.form is not None or e.url is None)


def _offers_roots(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.roots is not None


# ---------------------------------------------------------------- the server's state


@dataclass
class MemoryService:
    """Everything one ``filemem mcp`` process shares across calls and sessions."""

    store: str | None = None
    workspace: str | None = None
    agent: str | None = None
    process_session: str = field(default_factory=lambda: f"mcp-{uuid.uuid4().hex[:16]}")
    _provider: Provider | None = None
    _open_lock: threading.Lock = field(default_factory=threading.Lock)
    _roots: dict[str, str | None] = field(default_factory=dict)
    _warmed: bool = False

    # -- the store, opened on first use (never before initialize is answered)

    def provider(self) -> Provider:
        with self._open_lock:
            if self._provider is None:
                import filemem

                self._provider = filemem.open_store(self.store, create=True,
                                                    gate=ElicitationGate())
            return self._provider

    def warm_up(self) -> None:
        """Open the store and read HEAD in the background once the client is connected, so
        the first tool call does not pay for it. Failures surface on that call instead."""
        if self._warmed:
            return
        self._warmed = True

        def run() -> None:
            try:
                self.provider().store.checked()
            except Exception as exc:  # reported again, properly, by the first call
                log.debug("filemem mcp: warm-up failed: %s", exc)

        threading.Thread(target=run, name="filemem-mcp-warm-up", daemon=True).start()

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()

    # -- sessions

    def session_key(self, ctx: Context[Any, Any]) -> str:
        """Streamable HTTP in the handshake era has a session id; stdio is one client per
        process, and 2026-07-28 has no sessions, so there the process is the session."""
        try:
            headers = ctx.headers
        except ValueError:
            headers = None
        sid = headers.get("mcp-session-id") if headers is not None else None
        return f"mcp-{sid}" if sid else self.process_session

    def fallback_workspace(self) -> str:
        return self.workspace or os.getcwd()

    def session(self, key: str, roots_workspace: str | None) -> Session:
        return Session(key, roots_workspace or self.fallback_workspace(), self.agent)

    def cached_roots(self, key: str) -> tuple[bool, str | None]:
        return (key in self._roots, self._roots.get(key))

    def remember_roots(self, key: str, workspace: str | None) -> None:
        self._roots[key] = workspace

    def forget_roots(self) -> None:
        """A client said its roots changed: ask again on the next call."""
        self._roots.clear()

    async def legacy_roots(self, ctx: Context[Any, Any]) -> str | None:
        """Ask a handshake-era client for its roots now (bounded wait; any failure means
        "no usable root", and the fallback workspace is used)."""
        key = self.session_key(ctx)
        known, workspace = self.cached_roots(key)
        if known:
            return workspace
        try:
            with anyio.fail_after(ROOTS_TIMEOUT):
                result = await ctx.session.list_roots()
            workspace = _roots_workspace(result)
        except Exception as exc:
            log.warning("filemem mcp: roots/list failed (%s); using %s", exc,
                        self.fallback_workspace())
            workspace = None
        self.remember_roots(key, workspace)
        return workspace

    async def session_now(self, ctx: Context[Any, Any]) -> Session:
        """The session for a handler that cannot take part in an input-required round trip
        (resources, prompts): roots are asked directly in the handshake era, and under
        2026-07-28 taken from what a tool call already learnt (else the fallback)."""
        key = self.session_key(ctx)
        if not _offers_roots(ctx):
            return self.session(key, None)
        if is_modern(ctx.protocol_version):
            return self.session(key, self.cached_roots(key)[1])
        return self.session(key, await self.legacy_roots(ctx))

    # -- the approval prompt

    def message(self, request: ApprovalRequest, session: Session) -> str:
        """What the person reads: who asks, then everything that would be written."""
        who = f"agent {session.agent!r}" if session.agent else "your agent"
        return (f"filemem: {who} wants to change your memory (workspace {session.workspace}, "
                f"store {resolve_store_path(self.store)}).\n\n{approval.describe(request)}\n\n"
                "Approve writes exactly this as one git commit; decline refuses it and "
                "nothing is written.")


def service_of(ctx: Context[Any, Any]) -> MemoryService:
    server = ctx.mcp_server
    if not isinstance(server, FilememServer):
        raise RuntimeError("filemem tools must run inside a FilememServer")
    return server.memory


# ---------------------------------------------------------------- results and errors

_HINTS: Final = {
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


def _failure(action: str, exc: BaseException) -> CallToolResult:
    if isinstance(exc, errors.FilememError):
        return error_result(action, exc.code, exc.message, exc.details)
    if isinstance(exc, (FileExistsError, PermissionError)):
        return error_result(action, errors.NO_STORE, str(exc))
    log.error("filemem mcp: memory_%s failed", action, exc_info=exc)
    return error_result(action, "INTERNAL_ERROR", f"memory {action} failed: {exc}")


def _entry(e: Mapping[str, Any]) -> dict[str, Any]:
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


class AddResult(BaseModel):
    action: Literal["add"]
    ok: bool
    entry: EntryOut
    usage: UsageOut


class ReplaceResult(BaseModel):
    action: Literal["replace"]
    ok: bool
    entry: EntryOut
    previous: PreviousOut
    usage: UsageOut


class RemoveResult(BaseModel):
    action: Literal["remove"]
    ok: bool
    entry: EntryOut
    usage: UsageOut


class ConsolidateResult(BaseModel):
    action: Literal["consolidate"]
    ok: bool
    entry: EntryOut
    removed: list[PreviousOut]
    usage: UsageOut


class QueryResult(BaseModel):
    action: Literal["query"]
    ok: bool
    entries: list[EntryOut]
    total: int
    truncated: bool


class BudgetsResult(BaseModel):
    action: Literal["budgets"]
    ok: bool
    budgets: list[UsageOut]


def _shape(action: str, result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"action": action, "ok": True, "entry": _entry(result["entry"])}
    if action == "replace":
        out["previous"] = {"id": result["previous"]["id"], "text": result["previous"]["text"]}
    if action == "consolidate":
        out["removed"] = [{"id": r["id"], "text": r["text"]} for r in result["removed"]]
    out["usage"] = result["usage"]
    return out


# ---------------------------------------------------------------- resolvers

# Resolvers run before a tool body (the SDK's ``Resolve``). Under 2026-07-28 they may run
# once per round of an input-required round trip; a plain return value is recomputed each
# round, a request (``ListRoots``, ``Elicit``) is asked once and its answer kept.


async def _roots(ctx: Context[Any, Any]) -> _Known | ListRoots:
    """The client's roots, when it offers them: asked directly in the handshake era (with
    a time limit), through one input-required round under 2026-07-28, then cached for the
    session (a handshake-era client's ``roots/list_changed`` clears the cache)."""
    memory = service_of(ctx)
    if not _offers_roots(ctx):
        return _Known(None)
    if not is_modern(ctx.protocol_version):
        return _Known(await memory.legacy_roots(ctx))
    known, workspace = memory.cached_roots(memory.session_key(ctx))
    return _Known(workspace) if known else ListRoots()


async def _session(ctx: Context[Any, Any],
                   roots: Annotated[_Known | ListRootsResult, Resolve(_roots)]) -> Session:
    memory = service_of(ctx)
    key = memory.session_key(ctx)
    if isinstance(roots, ListRootsResult):
        workspace = _roots_workspace(roots)
        memory.remember_roots(key, workspace)
    else:
        workspace = roots.workspace
    return memory.session(key, workspace)


@dataclass(frozen=True)
class Plan:
    """What the approval resolver decided for one write, carried to the tool body."""

    session: Session
    route: Literal["in-call", "shown", "by-policy", "nobody"]
    request: ApprovalRequest | None = None  # the request the person is shown ("shown")
    error: errors.ProtocolError | None = None  # refused before anyone was asked
    failure: BaseException | None = None  # something else went wrong before asking


async def _plan(ctx: Context[Any, Any], session: Session, method: str,
                inp: dict[str, Any]) -> Plan:
    """Decide how this write will be approved, and under 2026-07-28 learn its exact
    payload by running the pipeline up to the approval step (`Provider.plan`)."""
    memory = service_of(ctx)
    if not can_elicit(ctx):
        return Plan(session, "nobody")
    if not is_modern(ctx.protocol_version):
        return Plan(session, "in-call")

    def probe() -> ApprovalRequest | None:
        """The request as the person must see it, or None if the policy decides alone."""
        request = memory.provider().plan(method, inp, session.write())
        return request if request.policy == "ask" else None

    try:
        request = await anyio.to_thread.run_sync(probe)
    except errors.ProtocolError as exc:
        return Plan(session, "in-call", error=exc)
    except Exception as exc:
        return Plan(session, "in-call", failure=exc)
    if request is None:
        return Plan(session, "by-policy")
    return Plan(session, "shown", request=request)


def _ask(ctx: Context[Any, Any], plan: Plan) -> Elicit[Approval] | None:
    """Under 2026-07-28, the question for a write that must be asked; else nothing."""
    if plan.route != "shown" or plan.request is None:
        return None
    return Elicit(service_of(ctx).message(plan.request, plan.session), Approval)


# ---------------------------------------------------------------- tool bodies


async def _write(ctx: Context[Any, Any], method: str, inp: dict[str, Any], plan: Plan,
                 answer: ElicitationResult[Approval]) -> CallToolResult:
    """Run one write on the real provider with the approver its plan calls for."""
    memory = service_of(ctx)
    if plan.error is not None:
        return _failure(method, plan.error)
    if plan.failure is not None:
        return _failure(method, plan.failure)
    session = plan.session
    approver: Approver
    if plan.route == "in-call":
        approver = _AskInCall(ctx, lambda request: memory.message(request, session))
    elif plan.route == "shown" and plan.request is not None:
        approver = _Bound(plan.request.payload, _outcome(answer))
    elif plan.route == "by-policy":
        approver = _Refuse("the write policy changed to ask after this call started, and "
                           "this client cannot be asked again within the call")
    else:
        client = ctx.session.client_params
        name = client.client_info.name if client is not None else "this MCP client"
        approver = _Refuse(f"{name} cannot show approval prompts (it declared no MCP "
                           "elicitation capability)")

    def run() -> dict[str, Any]:
        token = _APPROVER.set(approver)  # the worker's copied context: no other call sees it
        try:
            result: dict[str, Any] = getattr(memory.provider(), method)(inp, session.write())
        finally:
            _APPROVER.reset(token)
        return result

    try:
        result = await anyio.to_thread.run_sync(run)
    except Exception as exc:
        return _failure(method, exc)
    return ok_result(_shape(method, result))


_TRACK_DOC: Final = ("user = about the person (preferences, communication style, things to "
                     "avoid); agent = about the work (environment facts, project conventions, "
                     "lessons learnt)")
_SCOPE_DOC: Final = ("user-global = true in every workspace; workspace = true only in this "
                     "project (the session's workspace)")
_TAGS_DOC: Final = "optional labels, at most 16 of at most 32 characters each"
_MATCH_DOC: Final = ("a substring of the entry's text (case-insensitive for ASCII) that occurs "
                     "in exactly one entry you can see in that track/scope")

TrackArg = Annotated[Track, Field(description=_TRACK_DOC)]
ScopeArg = Annotated[Scope, Field(description=_SCOPE_DOC)]
TagsArg = Annotated[list[str] | None, Field(description=_TAGS_DOC)]
MatchArg = Annotated[str, Field(description=_MATCH_DOC)]


async def memory_query(
    ctx: Context[Any, Any],
    session: Annotated[Session, Resolve(_session)],
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

    def run() -> dict[str, Any]:
        return memory.provider().query(filt, opts)

    try:
        result = await anyio.to_thread.run_sync(run)
    except Exception as exc:
        return _failure("query", exc)
    return ok_result({"action": "query", "ok": True,
                      "entries": [_entry(e) for e in result["entries"]],
                      "total": result["total"], "truncated": result["truncated"]})


async def memory_budgets(ctx: Context[Any, Any]) -> Annotated[CallToolResult, BudgetsResult]:
    memory = service_of(ctx)
    try:
        rows = await anyio.to_thread.run_sync(lambda: memory.provider().budgets())
    except Exception as exc:
        return _failure("budgets", exc)
    return ok_result({"action": "budgets", "ok": True, "budgets": rows})


# ---------------------------------------------------------------- descriptions

_AFTER_WRITE: Final = (
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
    "short self-contained statement. " + _AFTER_WRITE)
REPLACE_DOC: Final = (
    "Rewrite one existing memory entry (a fact changed, or is better said another way). "
    "`match` picks the entry by a substring unique within the track/scope you can see; `text` "
    "is its complete new text. The user sees the old and new text before approving. "
    + _AFTER_WRITE)
REMOVE_DOC: Final = (
    "Delete one memory entry that is wrong or no longer true, picked by a `match` substring "
    "unique within the track/scope. The user sees the full text before approving. "
    + _AFTER_WRITE)
CONSOLIDATE_DOC: Final = (
    "Merge several related memory entries of one track/scope into one new entry, in one "
    "approved change: each of `matches` removes exactly one entry, `text` is added. Use it to "
    "free budget (BUDGET_EXCEEDED) or to clean up duplicates. The user sees every entry "
    "removed and the new text. " + _AFTER_WRITE)
QUERY_DOC: Final = (
    "Search the user's memory as this session sees it (shared entries and this agent's, "
    "user-global entries and this workspace's). Use it before saving (to avoid duplicates), "
    "to find the exact text for memory_replace/remove/consolidate, or when past preferences "
    "might matter. Read-only; needs no approval.")
BUDGETS_DOC: Final = (
    "Show how full each memory layer is: used/limit characters for user and agent track x "
    "user-global and workspace scope. Writes that would exceed a limit fail with "
    "BUDGET_EXCEEDED. Read-only.")
INSTRUCTIONS: Final = (
    "filemem is the user's long-term memory, kept as files in a git repository they own. "
    "Read memory with memory_query; save durable preferences, environment facts, conventions "
    "and lessons with memory_add (the user approves every write); keep it tidy with "
    "memory_replace, memory_remove and memory_consolidate. The resource " + SNAPSHOT_URI +
    " (and the prompt memory_snapshot) is the memory this session started with.")


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
        return f"memory_{self.method}"


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
             description=_TAGS_DOC + "; omit to keep the entry's tags, [] to clear them")],
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
                        _MATCH_DOC + ")")]),
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
    ctx = inspect.Parameter("ctx", _POS, annotation=Context[Any, Any])

    async def planner(ctx: Context[Any, Any], session: Session, **args: Any) -> Plan:
        return await _plan(ctx, session, tool.method, tool.to_input(args))

    _typed(planner, f"_plan_{tool.method}",
           [ctx, inspect.Parameter("session", _POS, annotation=Annotated[Session,
                                                                         Resolve(_session)]),
            *(inspect.Parameter(a.name, _POS, annotation=a.annotation) for a in tool.args)],
           Plan)

    async def asker(ctx: Context[Any, Any], plan: Plan) -> Elicit[Approval] | None:
        return _ask(ctx, plan)

    planned = inspect.Parameter("plan", _POS, annotation=Annotated[Plan, Resolve(planner)])
    _typed(asker, f"_ask_{tool.method}", [ctx, planned], Elicit[Approval] | None)

    async def body(ctx: Context[Any, Any], plan: Plan, answer: ElicitationResult[Approval],
                   **args: Any) -> CallToolResult:
        return await _write(ctx, tool.method, tool.to_input(args), plan, answer)

    return _typed(body, tool.name,
                  [ctx, planned,
                   inspect.Parameter("answer", _POS, annotation=Annotated[
                       ElicitationResult[Approval], Resolve(asker)]),
                   *(inspect.Parameter(a.name, _POS, annotation=a.annotation, default=a.default)
                     for a in tool.args)],
                  Annotated[CallToolResult, tool.result])


# ---------------------------------------------------------------- the server


class FilememServer(MCPServer[Any]):
    """MCPServer with the session-aware snapshot resource.

    A static resource function gets no request context, but the snapshot depends on the
    session (its id, and its workspace from the client's roots), so ``read_resource`` is
    overridden for that one URI."""

    def __init__(self, memory: MemoryService) -> None:
        super().__init__(SERVER_NAME, title="filemem memory", version=__version__,
                         instructions=INSTRUCTIONS, log_level="WARNING")
        self.memory = memory

    async def list_resources(self) -> list[Resource]:
        return [*await super().list_resources(), SNAPSHOT_RESOURCE]

    async def read_resource(self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
                            ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        if str(uri) == SNAPSHOT_URI and context is not None:
            text = await snapshot_text(context)
            return [ReadResourceContents(content=text, mime_type=SNAPSHOT_RESOURCE.mime_type)]
        return await super().read_resource(uri, context)


SNAPSHOT_RESOURCE: Final = Resource(
    uri=SNAPSHOT_URI, name="memory-snapshot", title="Memory snapshot",
    description="The memory this session started with, frozen at its first read (inject it "
                "into the model's context at session start).",
    mime_type="text/markdown")


async def snapshot_text(ctx: Context[Any, Any]) -> str:
    """The session's frozen snapshot: the provider renders it once per session id and
    records the audit row; every later read returns the same text."""
    memory = service_of(ctx)
    session = await memory.session_now(ctx)
    return await anyio.to_thread.run_sync(lambda: memory.provider().snapshot(session.protocol()))


async def memory_snapshot(ctx: Context[Any, Any]) -> str:
    """The memory this session started with (frozen at the first read)."""
    return await snapshot_text(ctx)


class _Middleware:
    """Sees every inbound message: starts the warm-up once the client is past its opening
    message, and forgets cached roots when a client says they changed."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.method == "notifications/roots/list_changed":
            self.memory.forget_roots()
        result = await call_next(ctx)
        if ctx.method not in ("initialize", "server/discover"):
            self.memory.warm_up()
        return result


def build_server(memory: MemoryService) -> FilememServer:
    """The MCP server with its six tools, the snapshot resource and prompt.

    Six tools rather than one ``memory`` tool with an ``action`` argument: annotations are
    per tool (query and budgets are read-only, remove and consolidate destructive), and
    each tool's schema can then require exactly the arguments its action needs."""
    server = FilememServer(memory)
    for tool in WRITE_TOOLS:
        server.add_tool(tool_function(tool), name=tool.name, title=tool.title,
                        description=tool.description, annotations=tool.annotations)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(memory_query, name="memory_query", title="Search memory",
                    description=QUERY_DOC, annotations=reads)
    server.add_tool(memory_budgets, name="memory_budgets", title="Memory budgets",
                    description=BUDGETS_DOC, annotations=reads)
    server.prompt(name="memory_snapshot", title="Memory snapshot",
                  description="Insert the memory this session started with.")(memory_snapshot)
    server.middleware.append(_Middleware(memory))
    return server


def run(*, store: str | None = None, workspace: str | None = None, agent: str | None = None,
        http_port: int | None = None) -> int:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # the fallback workspace is fixed now: the cwd could be removed while the server runs
    workspace = os.path.abspath(os.path.expanduser(workspace)) if workspace else os.getcwd()
    memory = MemoryService(store=store, workspace=workspace, agent=agent)
    server = build_server(memory)
    try:
        if http_port is None:
            anyio.run(server.run_stdio_async)
        else:
            # stdout carries nothing over HTTP either: a stray print or an access log
            # line must not be mistaken for protocol by whoever reads it
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1",
                                                               port=http_port))
    finally:
        memory.close()
    return 0


__all__ = ["SNAPSHOT_URI", "Approval", "FilememServer", "MemoryService", "build_server", "run"]
