"""A stand-in for an OpenAI-compatible chat completions API on a loopback port, for running
a real agent (Hermes) end to end without a model or network: it records every request and
answers from a script.

Run as ``python tests/fake_openai.py SCRIPT.json LOG.jsonl``; it prints its port on the
first line of stdout. ``SCRIPT.json`` is a list of assistant turns, used in order by the
requests that carry tools (the agent's own turns): ``{"tool_calls": [[name, {args}], ...]}``
or ``{"content": "text"}``. Any other request (a title, a summary) gets ``"ok"``. Streaming
(``"stream": true``) is answered as server-sent events, in the chunk shape OpenAI's SDK
reads.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPT: list[dict[str, Any]] = []
LOG = ""
_lock = threading.Lock()
_turn = [0]


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a request: the next scripted turn for the agent's own."""
    if not body.get("tools"):
        return {"content": "ok"}
    with _lock:
        i = _turn[0]
        _turn[0] += 1
    return SCRIPT[i] if i < len(SCRIPT) else {"content": "done"}


def _message(turn: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
    calls = turn.get("tool_calls")
    if calls:
        msg["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                              "function": {"name": name, "arguments": json.dumps(args)}}
                             for n, (name, args) in enumerate(calls)]
    return msg


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, code: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "test"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with _lock, open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no {self.path} here"}})
            return
        msg = _message(_reply(body))
        finish = "tool_calls" if msg.get("tool_calls") else "stop"
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": "fake-model"}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            self._json(200, {**base, "object": "chat.completion", "usage": usage,
                             "choices": [{"index": 0, "message": msg,
                                          "finish_reason": finish}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
        if msg.get("tool_calls"):
            delta["tool_calls"] = [{"index": n, **call}
                                   for n, call in enumerate(msg["tool_calls"])]
        chunks = [{**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                  {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}]
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main() -> None:
    global SCRIPT, LOG
    with open(sys.argv[1], encoding="utf-8") as f:
        SCRIPT = json.load(f)
    LOG = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
