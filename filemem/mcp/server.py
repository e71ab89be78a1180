"""The MCP server: the six tools, the session-aware snapshot resource and its prompt, the
middleware that warms the store up, and ``run``."""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys
from collections.abc import Iterable
from typing import Any, Final

import anyio
import anyio.to_thread
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    Resource,
    ToolAnnotations,
)
from pydantic import AnyUrl, ValidationError

from filemem import __version__, errors
from filemem.mcp.arguments import problems
from filemem.mcp.results import error_result, request_error
from filemem.mcp.sessions import MemoryService, service_of
from filemem.mcp.tools import WRITE_TOOLS, memory_budgets, memory_query, tool_function
from filemem.toolspec import (
    BUDGETS_DOC,
    QUERY_DOC,
    WRITE_TOOL_NAMES,
    argument_problems,
    invalid_arguments,
    unknown_tool,
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
    """MCPServer with the session-aware snapshot resource, and errors a client and a model
    can act on.

    A static resource function gets no request context, but the snapshot depends on the
    session (its id, and its workspace from the client's roots), so ``read_resource`` is
    overridden for that one URI. Arguments that do not fit a tool's input schema answer an
    ``INVALID_INPUT`` tool error naming the argument and what it takes (the SDK's own answer
    is pydantic's text, with no structured result); an unknown tool, prompt or resource is a
    JSON-RPC invalid-params error (-32602), as the MCP specification says, naming what
    exists; and a snapshot that cannot be read (a damaged store) is a JSON-RPC error carrying
    the protocol code and the hint, never a traceback on stderr."""

    def __init__(self, memory: MemoryService) -> None:
        super().__init__(SERVER_NAME, title="filemem memory", version=__version__,
                         instructions=INSTRUCTIONS, log_level="WARNING")
        self.memory = memory

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, unknown_tool(
                name, (t.name for t in self._tool_manager.list_tools())))
        # an argument the tool does not take: refused, as the schema says (additionalProperties
        # false) and the Hermes plugin's tools do; the SDK would drop it without a word
        off = [p for p in argument_problems(tool.parameters, arguments or {})
               if p.unknown or p.missing]
        if any(p.unknown for p in off):
            message, details = invalid_arguments(name, tool.parameters, off)
            return error_result(name.removeprefix("memory_"), errors.INVALID_INPUT, message,
                                details)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            message, details = problems(name, tool.parameters, cause)
            return error_result(name.removeprefix("memory_"), errors.INVALID_INPUT, message,
                                details)

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Context[Any, Any] | None = None
                         ) -> GetPromptResult | InputRequiredResult:
        if self._prompt_manager.get_prompt(name) is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; filemem's prompt is "
                           "memory_snapshot")
        return await super().get_prompt(name, arguments, context)

    async def list_resources(self) -> list[Resource]:
        return [*await super().list_resources(), SNAPSHOT_RESOURCE]

    async def read_resource(self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
                            ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        if str(uri) == SNAPSHOT_URI and context is not None:
            text = await snapshot_text(context)
            return [ReadResourceContents(content=text, mime_type=SNAPSHOT_RESOURCE.mime_type)]
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError:  # the SDK's says only "Unknown resource: <uri>"
            known = [str(r.uri) for r in await self.list_resources()]
            which = "resource is" if len(known) == 1 else "resources are"
            raise ResourceNotFoundError(
                f"unknown resource {str(uri)!r}; filemem's {which} {', '.join(known)}"
            ) from None


SNAPSHOT_RESOURCE: Final = Resource(
    uri=SNAPSHOT_URI, name="memory-snapshot", title="Memory snapshot",
    description="The memory this session started with, frozen at its first read (inject it "
                "into the model's context at session start).",
    mime_type="text/markdown")


async def snapshot_text(ctx: Context[Any, Any]) -> str:
    """The session's frozen snapshot: the provider renders it once per session id and
    records the audit row; every later read returns the same text. A store that cannot be
    read is a JSON-RPC error (there is no tool result to carry it)."""
    memory = service_of(ctx)
    session = await memory.session_now(ctx)
    try:
        return await anyio.to_thread.run_sync(
            lambda: memory.provider().snapshot(session.protocol(), say_empty=True,
                                                     tools=WRITE_TOOL_NAMES))
    except Exception as exc:
        raise request_error("reading the memory snapshot", exc) from None


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
    for registered in server._tool_manager.list_tools():  # what call_tool holds them to
        registered.parameters["additionalProperties"] = False
    server.prompt(name="memory_snapshot", title="Memory snapshot",
                  description="Insert the memory this session started with.")(memory_snapshot)
    server.middleware.append(_Middleware(memory))
    return server


class PortUnavailable(Exception):
    """``filemem mcp --http PORT``: the port cannot be listened on (the message says why and
    what to do; the CLI exits with its own status)."""


def listen(port: int) -> socket.socket:
    """The socket for 127.0.0.1:``port``, bound before anything is printed or the token file
    is written: a port another server holds is refused without touching that server's token
    file. It listens only once the token file is written (:func:`serve_http`), so a client
    that can connect can also read the token."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on 127.0.0.1 is already in use (another program, perhaps "
                f"another `filemem mcp --http {port}`, is listening there): start with "
                "another --http PORT, or stop that program") from None
        if exc.errno == errno.EACCES:
            raise PortUnavailable(
                f"this account may not listen on port {port} (ports below 1024 need "
                "privileges): start with another --http PORT, from 1024 to 65535") from None
        raise PortUnavailable(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; start "
                              "with another --http PORT") from None
    return sock


async def serve_http(server: FilememServer, sock: socket.socket) -> None:
    """Streamable HTTP on the bound loopback socket (path /mcp), behind the owner's bearer
    token."""
    import uvicorn

    from filemem.mcp import httpauth

    port = sock.getsockname()[1]
    token, path = httpauth.issue(port)
    sock.listen(128)
    app = httpauth.require(token, server.streamable_http_app(host="127.0.0.1"))
    print(f"filemem mcp: serving http://127.0.0.1:{port}/mcp\n"
          f"filemem mcp: clients must send the header 'Authorization: Bearer {token}' "
          f"(also in {path}, readable by you only)", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


def run(*, store: str | None = None, workspace: str | None = None, agent: str | None = None,
        http_port: int | None = None) -> int:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP).
    PortUnavailable if the HTTP port cannot be listened on."""
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
            sock = listen(http_port)
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            anyio.run(serve_http, server, sock)
    finally:
        memory.close()
    return 0


__all__ = ["SNAPSHOT_URI", "FilememServer", "MemoryService", "PortUnavailable", "build_server",
           "run"]
