"""`filemem mcp` on the wire: stdout carries JSON-RPC and nothing else, the process ends when
the client closes stdin, the 2.x SDK's default "auto" mode lands on 2026-07-28, and the
streamable HTTP transport on loopback serves the same tools with the same approval."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as t
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import filemem
from filemem.mcp.sessions import root_path
from tests.conftest import free_port


def _message(stdin: Any, message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def test_stdout_carries_protocol_messages_only(tmp_path: Path) -> None:
    store = tmp_path / "store"  # created by the server: a first session on a new machine
    proc = subprocess.Popen([sys.executable, "-m", "filemem.cli", "mcp", "--store", str(store)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.stdin is not None
    _message(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-client", "version": "1"}}})
    _message(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    calls = [("memory_add", {"text": "likes tea"}), ("memory_query", {}),
             ("memory_remove", {"match": "nothing"}), ("no_such_tool", {})]
    for i, (name, arguments) in enumerate(calls, start=2):
        _message(proc.stdin, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": name, "arguments": arguments}})
    _message(proc.stdin, {"jsonrpc": "2.0", "id": 9, "method": "resources/read",
                          "params": {"uri": "filemem://snapshot"}})
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    messages: list[dict[str, Any]] = []
    while {m.get("id") for m in messages} < {1, 2, 3, 4, 5, 9}:
        messages.append(json.loads(lines.get(timeout=60)))  # stdout is JSON-RPC, or this fails
    proc.stdin.close()  # the client goes away: the server ends, cleanly
    assert proc.wait(timeout=30) == 0
    while not lines.empty():
        messages.append(json.loads(lines.get()))
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    answers = {m["id"]: m for m in messages if "id" in m}
    assert answers[1]["result"]["serverInfo"]["name"] == "filemem"
    staged = answers[2]["result"]
    assert staged["isError"] and staged["structuredContent"]["error"]["details"]["outcome"] == \
        "pending"
    assert "raw-client cannot show approval prompts" in \
        staged["structuredContent"]["error"]["message"]
    assert answers[3]["result"]["structuredContent"]["total"] == 0
    assert answers[4]["result"]["structuredContent"]["error"]["code"] == "ENTRY_NOT_FOUND"
    # an unknown tool is invalid params (-32602), naming the tools there are
    assert answers[5]["error"]["code"] == -32602
    assert "memory_add" in answers[5]["error"]["message"]
    # nothing visible yet: the snapshot says so in words (the protocol's own face is '')
    assert "no memories yet" in answers[9]["result"]["contents"][0]["text"]
    with filemem.open_store(store) as p:
        assert p.list_entries() == [] and len(p.store.pending.list()) == 1


def test_auto_mode_negotiates_2026_07_28(tmp_path: Path) -> None:
    async def scenario() -> str:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "filemem.cli", "mcp", "--store", str(tmp_path / "store")], cwd=str(tmp_path))
        async with Client(params, mode="auto") as client:
            assert (await client.call_tool("memory_budgets", {})).structured_content
            return client.protocol_version

    assert anyio.run(scenario) == "2026-07-28"



def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    filemem.open_store(store, create=True).close()
    port = free_port()
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "filemem.cli", "mcp", "--store", str(store),
                             "--http", str(port), "--workspace", str(tmp_path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "XDG_STATE_HOME": str(state)})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.05)
        token_file = state / "filemem" / f"mcp-http-{port}.token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text(encoding="ascii").strip()
        url = f"http://127.0.0.1:{port}/mcp"
        # anyone else on the machine: refused before the MCP server sees anything
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            request = urllib.request.Request(
                url, data=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', method="POST",
                headers={"Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream", **headers})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401
        asked: list[str] = []

        async def approve(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
            asked.append(params.message)
            return t.ElicitResult(action="accept", content={"decision": "approve"})

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http), mode="legacy",
                              elicitation_callback=approve) as client:
                added = await client.call_tool("memory_add", {"text": "over http"})
                seen = await client.call_tool("memory_query", {})
            assert added.structured_content and seen.structured_content
            return added.structured_content, seen.structured_content

        added, seen = anyio.run(scenario)
        assert added["ok"] and "over http" in asked[0]
        assert [e["text"] for e in seen["entries"]] == ["over http"]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert out == b""  # nothing on stdout over HTTP either
    assert f"serving http://127.0.0.1:{port}/mcp".encode() in err
    assert b"Authorization: Bearer " in err


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    """Another program listens on the port: one line saying so and what to do, exit 9 (not
    3, which means a write was not approved), and the token file of whoever serves that
    port is left alone."""
    state = tmp_path / "state"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        token_file = state / "filemem" / f"mcp-http-{port}.token"
        token_file.parent.mkdir(parents=True)
        token_file.write_text("the other server's token\n", encoding="ascii")
        out = subprocess.run([sys.executable, "-m", "filemem.cli", "mcp", "--store",
                              str(tmp_path / "store"), "--http", str(port)],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             env={**os.environ, "XDG_STATE_HOME": str(state)}, timeout=60)
    assert out.returncode == 9, out
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr
    assert "another --http PORT, or stop that program" in out.stderr
    assert "serving" not in out.stderr and "Traceback" not in out.stderr
    assert token_file.read_text(encoding="ascii") == "the other server's token\n"
    assert not (tmp_path / "store").exists()  # nothing was opened either


@pytest.mark.parametrize(("uri", "path"), [
    ("file:///work/proj", "/work/proj"),
    ("file:///work/my%20proj/", "/work/my proj/"),
    ("file://localhost/srv/x", "/srv/x"),
    ("https://example.org/repo", None),
    ("git+ssh://host/repo", None),
])
def test_root_path(uri: str, path: str | None) -> None:
    assert root_path(uri) == path
