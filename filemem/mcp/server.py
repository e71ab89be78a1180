"""The MCP server: the six tools, the session-aware snapshot resource and its prompt, the
middleware that warms the store up, and ``run``."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any, Final

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult, Resource, ToolAnnotations
from pydantic import AnyUrl

from filemem import __version__
from filemem.mcp.names import WRITE_TOOL_NAMES
from filemem.mcp.sessions import MemoryService, service_of
from filemem.mcp.tools import (
    BUDGETS_DOC,
    QUERY_DOC,
    WRITE_TOOLS,
    memory_budgets,
    memory_query,
    tool_function,
)

SERVER_NAME: Final = "filemem"
SNAPSHOT_URI: Final = "filemem://snapshot"

INSTRUCTIONS: Final = (
    "filemem is the user's long-term memory, kept as files in a git repository they own. "
    "Read memory with memory_query; save durable preferences, environment facts, conventions "
    "and lessons with memory_add (the user approves every write); keep it tidy with "
    "memory_replace, memory_remove and memory_consolidate. The resource " + SNAPSHOT_URI +
    " (and the prompt memory_snapshot) is the memory this session started with.")


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
    return await anyio.to_thread.run_sync(
        lambda: memory.provider().snapshot(session.protocol(), tools=WRITE_TOOL_NAMES))


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


async def serve_http(server: FilememServer, port: int) -> None:
    """Streamable HTTP on 127.0.0.1:``port`` (path /mcp), behind the owner's bearer token."""
    import uvicorn

    from filemem.mcp import httpauth

    token, path = httpauth.issue(port)
    app = httpauth.require(token, server.streamable_http_app(host="127.0.0.1"))
    print(f"filemem mcp: serving http://127.0.0.1:{port}/mcp\n"
          f"filemem mcp: clients must send the header 'Authorization: Bearer {token}' "
          f"(also in {path}, readable by you only)", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


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
            anyio.run(serve_http, server, http_port)
    finally:
        memory.close()
    return 0


__all__ = ["SNAPSHOT_URI", "FilememServer", "MemoryService", "build_server", "run"]
