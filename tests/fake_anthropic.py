"""A stand-in for the Anthropic Messages API on a loopback port, so that the real Claude
Code CLI can run a whole session (``claude -p``) with no network and no account: it
records every request Claude Code sends (what the model would have been given) and
answers each with one short assistant message (streamed when asked)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        self.server.requests.append({"path": self.path, "body": request})
        message = {"id": "msg_fake", "type": "message", "role": "assistant",
                   "model": request.get("model", "fake"), "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
                   "content": [{"type": "text", "text": "ok"}]}
        if not request.get("stream"):
            data = json.dumps(message).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        events = [
            ("message_start", {"message": {**message, "content": []}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            ("content_block_stop", {"index": 0}),
            ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {}),
        ]
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
                             .encode())
        self.wfile.flush()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    requests: list[dict[str, Any]]


@contextmanager
def fake_api() -> Iterator[_Server]:
    """The server (``.server_address``, ``.requests``), serving until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def messages(server: _Server) -> list[dict[str, Any]]:
    """The bodies of the model requests Claude Code made."""
    return [r["body"] for r in server.requests if r["path"].startswith("/v1/messages")
            and "messages" in r["body"]]


def texts(body: dict[str, Any]) -> list[str]:
    """Every text block a request gives the model: system prompt and messages."""
    out: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        out.append(system)
    elif isinstance(system, list):
        out += [b.get("text", "") for b in system if isinstance(b, dict)]
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b.get("text", "") for b in content if isinstance(b, dict)]
    return out
