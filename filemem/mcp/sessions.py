"""Who is asking, and the state one ``filemem mcp`` process shares.

A session's workspace comes from the client's MCP roots when it offers them (else
``--workspace``, else the server's cwd) and its agent from ``--agent``; the store is opened
on first use, never before ``initialize`` is answered.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from mcp.server.mcpserver import Context
from mcp.shared.message import ServerMessageMetadata
from mcp_types import ListRootsRequest, ListRootsResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from filemem import approval
from filemem.approval import ApprovalRequest
from filemem.location import resolve_store_path
from filemem.mcp.gates import ElicitationGate
from filemem.provider import Provider, write_context
from filemem.shown import visible

log = logging.getLogger("filemem.mcp")

ROOTS_TIMEOUT: Final = 10.0  # seconds a client gets to answer roots/list before we fall back

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
class Known:
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


def roots_workspace(result: ListRootsResult) -> str | None:
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


def offers_roots(ctx: Context[Any, Any]) -> bool:
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
    _closed: bool = False

    # -- the store, opened on first use (never before initialize is answered)

    def provider(self) -> Provider:
        with self._open_lock:
            if self._closed:
                raise RuntimeError("filemem mcp is shutting down")
            if self._provider is None:
                import filemem

                # not validated here: an invalid file at HEAD fails each call (naming the
                # file, its commit, the way out) and the store stays open, so its fix is
                # served at once and history is walked once, not per call
                self._provider = filemem.open_store(self.store, create=True,
                                                    gate=ElicitationGate(), validate=False)
            return self._provider

    def warm_up(self) -> None:
        """Open the store and read HEAD in the background once the client is connected, so
        the first tool call does not pay for it. Failures surface on that call instead."""
        if self._warmed:
            return
        self._warmed = True

        def run() -> None:
            try:
                self.provider().budgets()  # reads (and validates) the view of HEAD
            except Exception as exc:  # reported again, properly, by the first call
                log.debug("filemem mcp: warm-up failed: %s", exc)

        threading.Thread(target=run, name="filemem-mcp-warm-up", daemon=True).start()

    def close(self) -> None:
        """Close the store once no one is opening it. The warm-up thread is a daemon that
        dies with the process: taking the open lock waits for a store it is creating (or
        opening) to be whole, and no opening starts after this."""
        with self._open_lock:
            self._closed = True
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
        "no usable root", and the fallback workspace is used).

        ``roots/list`` is a plain server-to-client request in the handshake era; only
        2026-07-28 deprecates it (SEP-2577), and there it is asked through an input-required
        round instead (``routing.resolve_roots``). So the request is sent as such, tied to
        the call that needs it (over HTTP it travels on that call's stream), rather than
        through the SDK's ``list_roots``, which warns about the 2026 deprecation whatever
        the era."""
        key = self.session_key(ctx)
        known, workspace = self.cached_roots(key)
        if known:
            return workspace
        try:
            with anyio.fail_after(ROOTS_TIMEOUT):
                result = await ctx.session.send_request(
                    ListRootsRequest(), ListRootsResult,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
            workspace = roots_workspace(result)
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
        if not offers_roots(ctx):
            return self.session(key, None)
        if is_modern(ctx.protocol_version):
            return self.session(key, self.cached_roots(key)[1])
        return self.session(key, await self.legacy_roots(ctx))

    # -- the approval prompt

    def message(self, request: ApprovalRequest, session: Session) -> str:
        """What the person reads: who asks, then everything that would be written."""
        who = f"agent {session.agent!r}" if session.agent else "your agent"
        where = visible(f"workspace {session.workspace}, store {resolve_store_path(self.store)}")
        return (f"filemem: {who} wants to change your memory ({where}).\n\n"
                f"{approval.describe(request)}\n\n"
                "Approve writes exactly this as one git commit; decline refuses it and "
                "nothing is written.")


def service_of(ctx: Context[Any, Any]) -> MemoryService:
    """The service of the FilememServer running this call (the server keeps it as
    ``memory``; looked up by attribute, as the server module imports this one)."""
    memory = getattr(ctx.mcp_server, "memory", None)
    if not isinstance(memory, MemoryService):
        raise RuntimeError("filemem tools must run inside a FilememServer")
    return memory


