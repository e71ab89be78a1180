"""``filemem mcp --http``: only the owner's clients get in.

A loopback port is open to every local user and process, so the HTTP server requires a
bearer token: made fresh at each start (or taken from ``$FILEMEM_MCP_TOKEN``, for a client
configured once), kept in a file only the owner can read, printed once on stderr, and
compared in constant time on every request. A request without it gets 401 and never
reaches the MCP server. (Cross-site browser requests stay refused by the SDK's own
host/origin checks.)
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

TOKEN_ENV: Final = "FILEMEM_MCP_TOKEN"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def token_file(port: int) -> str:
    """Where the token of the server on ``port`` is kept (the owner's state folder)."""
    from platformdirs import user_state_dir

    return os.path.join(user_state_dir("filemem", appauthor=False), f"mcp-http-{port}.token")


def issue(port: int) -> tuple[str, str]:
    """The token for this start and the file holding it (0600 in a 0700 folder)."""
    token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    path = token_file(port)
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, token.encode("ascii") + b"\n")
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token, path


def require(token: str, app: App) -> App:
    """``app`` behind the bearer token: anything else is answered 401 here."""
    expected = f"Bearer {token}".encode("ascii")

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, expected):
            await app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized: this filemem MCP server needs the header "
                                    "'Authorization: Bearer <token>' (the token is printed "
                                    "when the server starts and kept in the file it names)"
                           }).encode("utf-8")
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b'Bearer realm="filemem"'),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return guarded
