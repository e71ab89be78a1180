"""`filemem mcp` driven by the MCP clients people use: the official TypeScript SDK (v1, which
Claude Code and older hosts are built on; v2, the current client) and the MCP Inspector's CLI,
pinned in tests/node and run with Node from PyPI (tests/nodejs.py).

Which client speaks which protocol: the v1 SDK (1.32) knows only the handshake era and sends
2025-11-25; the v2 client negotiates the handshake era by default (``versionNegotiation``
mode ``legacy``) and 2026-07-28 when pinned (``{pin: '2026-07-28'}``); the Inspector CLI
picks with ``--protocol-era legacy|modern``. Each session goes through success, a declined,
a cancelled and a staged write, and every error a tool can answer, and each check is the
one a host makes: the client did not throw (the TypeScript SDK throws when a structured
result does not match the tool's output schema, and the model then never sees the error),
the text the model reads carries ``error.code`` and the hint, and the server wrote nothing
on stderr (no traceback, no deprecation warning) during the whole session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import filemem
from tests.conftest import ctx, file_of, free_port, git
from tests.nodejs import NODE_DIR, NodeTools, node_tools

UG = {"track": "user", "scope": "user-global"}
CLIENT = NODE_DIR / "mcp-client.mjs"
# (client, era, the protocol version it must have negotiated)
CLIENTS = [("v1", "legacy", "2025-11-25"), ("v2", "legacy", "2025-11-25"),
           ("v2", "modern", "2026-07-28")]
CLIENT_IDS = [f"{sdk}-{era}" for sdk, era, _ in CLIENTS]


@pytest.fixture(scope="module")
def node() -> NodeTools:
    return node_tools()


def stdio_server(store: Path, cwd: Path, *extra: str) -> dict[str, Any]:
    return {"command": sys.executable,
            "args": ["-m", "filemem.cli", "mcp", "--store", str(store), *extra],
            "cwd": str(cwd)}


def drive(node: NodeTools, tmp_path: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """Run one client session from ``plan`` (see tests/node/mcp-client.mjs)."""
    plan_file = tmp_path / f"plan-{time.monotonic_ns()}.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    out = subprocess.run([str(node.node), str(CLIENT), str(plan_file)], capture_output=True,
                         text=True, env=node.env(), timeout=300)
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    report["clientStderr"] = out.stderr
    return report


# ---------------------------------------------------------------- what a host checks


def schemas_of(listed: dict[str, Any]) -> dict[str, Any]:
    return {tool["name"]: tool["outputSchema"] for tool in listed["tools"]}


def model_view(step: dict[str, Any], schemas: dict[str, Any], tool: str) -> dict[str, Any]:
    """A tool result as the host passes it on: the client took it (no throw, in particular
    no output-schema error), its structured content matches the declared schema, and the
    text the model reads is the same JSON."""
    assert "thrown" not in step, step["thrown"]
    result = step["result"]
    content = result["structuredContent"]
    Draft202012Validator(schemas[tool]).validate(content)
    texts = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert [json.loads(t) for t in texts] == [content]
    assert bool(result.get("isError")) is (not content["ok"])
    view: dict[str, Any] = json.loads(texts[0])
    return view


def ok(step: dict[str, Any], schemas: dict[str, Any], tool: str) -> dict[str, Any]:
    view = model_view(step, schemas, tool)
    assert view["ok"] is True, view
    return view


def error(step: dict[str, Any], schemas: dict[str, Any], tool: str, code: str) -> dict[str, Any]:
    """The error the model reads: the protocol code, a message and the hint."""
    view = model_view(step, schemas, tool)
    assert view["ok"] is False and view["action"] == tool.removeprefix("memory_"), view
    err: dict[str, Any] = view["error"]
    assert err["code"] == code, err
    assert err["message"] and err["hint"], err
    return err


def thrown(step: dict[str, Any], code: int) -> dict[str, Any]:
    """A JSON-RPC error the client raised, with its code."""
    assert "thrown" in step, step
    failure: dict[str, Any] = step["thrown"]
    assert failure["code"] == code, failure
    return failure


def assert_quiet(report: dict[str, Any]) -> None:
    """Nothing on the server's stderr for the whole session: no traceback, no warning."""
    assert report["serverStderr"] == "", report["serverStderr"]


# ---------------------------------------------------------------- every result, every client


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store under the ask policy (default budgets: user/user-global 2000) with two entries
    that share a word, and one that a person edits by hand during the session."""
    path = tmp_path / "store"
    filemem.open_store(path, create=True).close()
    with filemem.open_store(path, write_policy="auto") as p:
        p.add({**UG, "text": "twin one"}, ctx())
        p.add({**UG, "text": "twin two"}, ctx())
        p.add({**UG, "text": "edited by hand"}, ctx())
    (tmp_path / "proj").mkdir()
    return path


def session_plan(store: Path, tmp_path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The calls of one whole session and the person's answers, in order."""
    with filemem.open_store(store) as p:
        hand = next(e for e in p.list_entries() if e["text"] == "edited by hand")
    hand_file = file_of(store, hand["id"])
    lock = store / ".git" / "index.lock"

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"op": "callTool", "name": name, "arguments": arguments}

    steps = [
        {"op": "listTools"},
        call("memory_add", text="first fact", **UG),                   # 1 approved
        call("memory_add", text="declined fact", **UG),                # 2 declined
        call("memory_add", text="cancelled fact", **UG),               # 3 dismissed
        call("memory_add", text="declined in the form", **UG),         # 4 accept + decline
        call("memory_add", text="x" * 1990, **UG),                     # 5 over budget
        call("memory_replace", match="twin", text="t", **UG),          # 6 two entries match
        call("memory_remove", match="nowhere", **UG),                  # 7 no entry matches
        call("memory_add", text="", **UG),                             # 8 protocol rule
        call("memory_add", text=5),                                    # 9 wrong type
        call("memory_add", text="x", track="bogus"),                   # 10 unknown enum value
        call("memory_replace", text="no match given"),                 # 11 missing argument
        call("memory_consolidate", matches=[], text="x"),              # 12 too few items
        call("memory_query", limit=0),                                 # 13 below the minimum
        {"op": "writeFile", "path": str(hand_file),
         "text": hand_file.read_text(encoding="utf-8") + " (my edit)"},
        call("memory_replace", match="edited by hand", text="y", **UG),  # 15 hand edit
        {"op": "writeFile", "path": str(lock), "text": ""},
        call("memory_add", text="while git works", **UG),              # 17 git holds the index
        {"op": "removeFile", "path": str(lock)},
        call("memory_consolidate", matches=["twin one", "twin two"], text="twins",
             **UG),                                                    # 19 approved
        call("memory_replace", match="first fact", text="first fact!", **UG),  # 20 approved
        call("memory_remove", match="twins", **UG),                    # 21 approved
        call("memory_query", text="first"),                            # 22
        call("memory_budgets"),                                        # 23
        {"op": "readResource", "uri": "filemem://snapshot"},           # 24
        {"op": "getPrompt", "name": "memory_snapshot"},                # 25
        {"op": "getPrompt", "name": "no_such_prompt"},                 # 26
        {"op": "readResource", "uri": "filemem://no-such-resource"},   # 27
        call("no_such_tool"),                                          # 28
    ]
    answers = ["approve", "decline", "cancel", "decline-in-form", "approve", "approve",
               "approve"]
    return steps, answers


def check_session(report: dict[str, Any], version: str) -> None:
    steps = report["steps"]
    assert report["protocolVersion"] == version
    schemas = schemas_of(steps[0]["result"])
    assert ok(steps[1], schemas, "memory_add")["entry"]["text"] == "first fact"
    assert error(steps[2], schemas, "memory_add", "WRITE_DENIED")["details"]["outcome"] == \
        "rejected"
    cancelled = error(steps[3], schemas, "memory_add", "WRITE_DENIED")
    assert cancelled["details"]["outcome"] == "cancelled"
    assert "dismissed" in cancelled["hint"]
    assert error(steps[4], schemas, "memory_add", "WRITE_DENIED")["details"]["outcome"] == \
        "rejected"
    full = error(steps[5], schemas, "memory_add", "BUDGET_EXCEEDED")
    assert full["details"]["limit"] == 2000 and "memory_consolidate" in full["hint"]
    error(steps[6], schemas, "memory_replace", "AMBIGUOUS_MATCH")
    error(steps[7], schemas, "memory_remove", "ENTRY_NOT_FOUND")
    error(steps[8], schemas, "memory_add", "INVALID_INPUT")
    for index, tool, argument, says in [
            (9, "memory_add", "text", "`text` must be a string (got 5)"),
            (10, "memory_add", "track", '`track` must be one of "user", "agent" (got "bogus")'),
            (11, "memory_replace", "match", "`match` is required (a string)"),
            (12, "memory_consolidate", "matches",
             "`matches` must be a list of 1 to 20 strings (got [])"),
            (13, "memory_query", "limit", "`limit` must be a whole number of at least 1")]:
        bad = error(steps[index], schemas, tool, "INVALID_INPUT")
        message = bad["message"]
        assert says in message and f"call {tool} again" in message, message
        assert "\n" not in message and "pydantic" not in message, message
        assert bad["details"]["arguments"][0]["argument"] == argument
    hand = error(steps[15], schemas, "memory_replace", "WRITE_DENIED")
    assert hand["details"]["outcome"] == "hand-edit-pending"
    busy = error(steps[17], schemas, "memory_add", "STORE_BUSY")
    assert "index.lock" in busy["message"]
    assert ok(steps[19], schemas, "memory_consolidate")["entry"]["text"] == "twins"
    assert ok(steps[20], schemas, "memory_replace")["previous"]["text"] == "first fact"
    assert ok(steps[21], schemas, "memory_remove")["entry"]["text"] == "twins"
    assert [e["text"] for e in ok(steps[22], schemas, "memory_query")["entries"]] == \
        ["first fact!"]
    assert len(ok(steps[23], schemas, "memory_budgets")["budgets"]) == 4
    snapshot = steps[24]["result"]["contents"][0]["text"]
    assert "- first fact!" in snapshot and "edited by hand" in snapshot  # frozen at 1st read
    prompt = steps[25]["result"]["messages"][0]["content"]["text"]
    assert prompt == snapshot
    assert "memory_snapshot" in thrown(steps[26], -32602)["message"]
    thrown(steps[27], -32602)
    assert "memory_add" in thrown(steps[28], -32602)["message"]
    # the person was asked exactly for the writes that reached approval
    assert len(report["asked"]) == 7
    assert "declined fact" in report["asked"][1] and "twins" in report["asked"][4]
    assert_quiet(report)


@pytest.mark.parametrize(("sdk", "era", "version"), CLIENTS, ids=CLIENT_IDS)
def test_a_whole_session_with_the_typescript_sdk(node: NodeTools, store: Path, tmp_path: Path,
                                                 sdk: str, era: str, version: str) -> None:
    steps, answers = session_plan(store, tmp_path)
    proj = tmp_path / "proj"
    report = drive(node, tmp_path, {
        "sdk": sdk, "era": era, "server": stdio_server(store, tmp_path),
        "answers": answers, "roots": [proj.as_uri()], "steps": steps})
    check_session(report, version)
    with filemem.open_store(store) as p:
        texts = sorted(e["text"] for e in p.list_entries())
        workspaces = {e["workspaceKey"] for e in p.list_entries() if e["scope"] == "workspace"}
    assert texts == ["edited by hand", "first fact!"]
    assert workspaces == set()  # every write was user-global
    # the approved writes, the refusals and nothing else went into git
    log = git(store, "log", "--format=%s")
    assert log.count("-denied") == 3 and "consolidate" in log


# ---------------------------------------------------------------- a damaged store


def damaged(tmp_path: Path) -> tuple[Path, str]:
    """A store whose one entry file was committed with front-matter that is not YAML."""
    store = tmp_path / "damaged"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        entry = p.add({**UG, "text": "fine until git"}, ctx())["entry"]
    path = file_of(store, entry["id"])
    path.write_text("---\nid: [unclosed\n---\nfine until git", encoding="utf-8")
    git(store, "commit", "-qam", "an edit that broke the front-matter")
    return store, path.name


@pytest.mark.parametrize(("sdk", "era", "version"), CLIENTS, ids=CLIENT_IDS)
def test_a_damaged_store_answers_clean_errors(node: NodeTools, tmp_path: Path, sdk: str,
                                              era: str, version: str) -> None:
    store, name = damaged(tmp_path)
    report = drive(node, tmp_path, {
        "sdk": sdk, "era": era, "server": stdio_server(store, tmp_path), "answers": [],
        "steps": [{"op": "listTools"},
                  {"op": "callTool", "name": "memory_query", "arguments": {}},
                  {"op": "callTool", "name": "memory_add", "arguments": {"text": "x"}},
                  {"op": "readResource", "uri": "filemem://snapshot"},
                  {"op": "getPrompt", "name": "memory_snapshot"}]})
    steps = report["steps"]
    assert report["protocolVersion"] == version
    schemas = schemas_of(steps[0]["result"])
    for step, tool in ((steps[1], "memory_query"), (steps[2], "memory_add")):
        assert name in error(step, schemas, tool, "STORE_CORRUPT")["message"]
    for step in steps[3:]:
        failure = thrown(step, -32603)
        assert "STORE_CORRUPT" in failure["message"] and name in failure["message"]
        assert failure["data"]["code"] == "STORE_CORRUPT" and failure["data"]["hint"]
    assert_quiet(report)


@pytest.mark.parametrize(("sdk", "era", "version"), [CLIENTS[0], CLIENTS[2]],
                         ids=[CLIENT_IDS[0], CLIENT_IDS[2]])
def test_a_store_that_cannot_be_opened(node: NodeTools, tmp_path: Path, sdk: str, era: str,
                                       version: str) -> None:
    """Two more codes a tool answers before any write: a store made by a newer filemem,
    and a store path that cannot be a store (a plain file)."""
    newer = tmp_path / "newer"
    filemem.open_store(newer, create=True).close()
    config = newer / "filemem.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("schema: 1", "schema: 99"),
                      encoding="utf-8")
    git(newer, "commit", "-qam", "a store from the future")
    not_a_store = tmp_path / "a-file"
    not_a_store.write_text("not a store\n", encoding="utf-8")
    for path, code in ((newer, "STORE_UNSUPPORTED_VERSION"), (not_a_store, "NO_STORE")):
        report = drive(node, tmp_path, {
            "sdk": sdk, "era": era, "server": stdio_server(path, tmp_path), "answers": [],
            "steps": [{"op": "listTools"},
                      {"op": "callTool", "name": "memory_budgets", "arguments": {}},
                      {"op": "callTool", "name": "memory_add", "arguments": {"text": "x"}},
                      {"op": "readResource", "uri": "filemem://snapshot"}]})
        steps = report["steps"]
        schemas = schemas_of(steps[0]["result"])
        error(steps[1], schemas, "memory_budgets", code)
        error(steps[2], schemas, "memory_add", code)
        assert thrown(steps[3], -32603)["data"]["code"] == code
        assert_quiet(report)


# ---------------------------------------------------------------- over HTTP, and the Inspector


@dataclass
class HttpServer:
    url: str
    token: str
    store: Path
    proc: subprocess.Popen[bytes]



@pytest.fixture
def http_server(store: Path, tmp_path: Path) -> Iterator[HttpServer]:
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "FILEMEM_MCP_TOKEN": "test-token-of-the-owner"}
    proc = subprocess.Popen([sys.executable, "-m", "filemem.cli", "mcp", "--store", str(store),
                             "--http", str(port), "--workspace", str(tmp_path / "proj")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    assert proc.stderr is not None
    url = f"http://127.0.0.1:{port}/mcp"
    first = proc.stderr.readline().decode()  # printed once the port is listening
    assert first == f"filemem mcp: serving {url}\n", first + proc.stderr.read().decode()
    assert "Authorization: Bearer test-token-of-the-owner" in proc.stderr.readline().decode()
    yield HttpServer(url, "test-token-of-the-owner", store, proc)
    proc.terminate()
    proc.wait(timeout=30)


def test_http_sessions_with_both_sdks(node: NodeTools, http_server: HttpServer,
                                      tmp_path: Path) -> None:
    """One server, three clients at once: each session asks its own person."""
    server = {"url": http_server.url, "token": http_server.token}
    reports = {}
    for sdk, era, version in CLIENTS:
        reports[(sdk, era)] = report = drive(node, tmp_path, {
            "sdk": sdk, "era": era, "server": server,
            "answers": ["approve", "decline", "cancel"],
            "steps": [{"op": "listTools"},
                      {"op": "callTool", "name": "memory_add",
                       "arguments": {"text": f"over http by {sdk} {era}", **UG}},
                      {"op": "callTool", "name": "memory_add",
                       "arguments": {"text": "declined", **UG}},
                      {"op": "callTool", "name": "memory_add",
                       "arguments": {"text": "cancelled", **UG}},
                      {"op": "callTool", "name": "memory_remove",
                       "arguments": {"match": "nowhere", **UG}},
                      {"op": "callTool", "name": "memory_add", "arguments": {"tags": "x"}},
                      {"op": "readResource", "uri": "filemem://snapshot"},
                      {"op": "getPrompt", "name": "no_such_prompt"}]})
        steps = report["steps"]
        assert report["protocolVersion"] == version
        schemas = schemas_of(steps[0]["result"])
        ok(steps[1], schemas, "memory_add")
        assert error(steps[2], schemas, "memory_add", "WRITE_DENIED")["details"] == \
            {"outcome": "rejected"}
        assert error(steps[3], schemas, "memory_add", "WRITE_DENIED")["details"] == \
            {"outcome": "cancelled"}
        error(steps[4], schemas, "memory_remove", "ENTRY_NOT_FOUND")
        bad = error(steps[5], schemas, "memory_add", "INVALID_INPUT")
        assert {a["argument"] for a in bad["details"]["arguments"]} == {"text", "tags"}
        assert "twin one" in steps[6]["result"]["contents"][0]["text"]
        thrown(steps[7], -32602)
    with filemem.open_store(http_server.store) as p:
        texts = {e["text"] for e in p.list_entries()}
    assert {f"over http by {sdk} {era}" for sdk, era, _ in CLIENTS} <= texts
    http_server.proc.terminate()
    _, rest = http_server.proc.communicate(timeout=30)
    assert rest == b""  # nothing after the two start-up lines: no warning, no traceback


def inspector(node: NodeTools, era: str, *args: str, server: HttpServer | None = None,
              stdio: list[str] | None = None, cwd: Path | None = None
              ) -> tuple[int, dict[str, Any], str]:
    """One Inspector CLI run (``--format json``): its exit status, its JSON and stderr."""
    cli = (node.modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" /
           "build" / "index.js")
    target: list[str]
    if server is not None:
        target = ["--transport", "http", "--server-url", server.url,
                  "--header", f"Authorization: Bearer {server.token}"]
    else:
        target = ["--", *(stdio or [])]
    out = subprocess.run(
        [str(node.node), str(cli), "--cli", "--protocol-era", era, "--format", "json",
         *args, *target],
        capture_output=True, text=True, env={**node.env(), "HOME": str(cwd or Path.home())},
        cwd=cwd, timeout=120)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return out.returncode, lines[0] if lines else {}, out.stderr


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_cli(node: NodeTools, http_server: HttpServer, tmp_path: Path,
                           era: str) -> None:
    """The Inspector CLI over HTTP: it declares no elicitation, so a write is staged for the
    owner; every error reaches its output with the code and the hint."""
    def call(tool: str, **arguments: Any) -> tuple[int, dict[str, Any]]:
        code, out, err = inspector(node, era, "--method", "tools/call", "--tool-name", tool,
                                   "--tool-args-json", json.dumps(arguments),
                                   server=http_server, cwd=tmp_path)
        assert "result" in out, (out, err)
        return code, out["result"]

    code, listed, _ = inspector(node, era, "--method", "tools/list", server=http_server,
                                cwd=tmp_path)
    assert code == 0
    schemas = schemas_of(listed["result"])
    code, found = call("memory_query", text="twin")
    assert code == 0
    assert len(ok({"result": found}, schemas, "memory_query")["entries"]) == 2
    for (tool, arguments), expected in [
            (("memory_add", {"text": f"from the inspector ({era})", **UG}), "WRITE_DENIED"),
            (("memory_add", {"text": "x" * 2100, **UG}), "BUDGET_EXCEEDED"),
            (("memory_replace", {"match": "twin", "text": "t", **UG}), "AMBIGUOUS_MATCH"),
            (("memory_remove", {"match": "nowhere", **UG}), "ENTRY_NOT_FOUND"),
            (("memory_add", {"text": "x", "scope": "everywhere"}), "INVALID_INPUT")]:
        code, result = call(tool, **arguments)
        assert code != 0  # the Inspector exits non-zero on a tool error, and prints it whole
        err = error({"result": result}, schemas, tool, expected)
        if expected == "WRITE_DENIED":
            assert err["details"]["outcome"] == "pending"
    code, read, _ = inspector(node, era, "--method", "resources/read", "--uri",
                              "filemem://snapshot", server=http_server, cwd=tmp_path)
    assert code == 0 and "twin one" in read["result"]["contents"][0]["text"]
    code, prompt, _ = inspector(node, era, "--method", "prompts/get", "--prompt-name",
                                "memory_snapshot", server=http_server, cwd=tmp_path)
    assert code == 0 and "twin one" in prompt["result"]["messages"][0]["content"]["text"]
    code, _, err = inspector(node, era, "--method", "prompts/get", "--prompt-name",
                             "no_such_prompt", server=http_server, cwd=tmp_path)
    assert code != 0 and "unknown prompt 'no_such_prompt'" in err, err
    with filemem.open_store(http_server.store) as p:
        assert [r["payload"]["text"] for r in p.store.pending.list()] == \
            [f"from the inspector ({era})"]
    http_server.proc.terminate()
    _, rest = http_server.proc.communicate(timeout=30)
    assert rest == b""


def test_the_inspector_cli_over_stdio(node: NodeTools, tmp_path: Path) -> None:
    """The Inspector starting `filemem mcp` itself, on a new store: the empty snapshot says
    so in words, and the server's stderr (which the Inspector relays) stays empty."""
    store = tmp_path / "fresh"
    for era in ("legacy", "modern"):
        server = [sys.executable, "-m", "filemem.cli", "mcp", "--store", str(store)]
        code, read, err = inspector(node, era, "--method", "resources/read", "--uri",
                                    "filemem://snapshot", stdio=server, cwd=tmp_path)
        assert code == 0, err
        assert "no memories yet" in read["result"]["contents"][0]["text"]
        code, called, err = inspector(node, era, "--method", "tools/call", "--tool-name",
                                      "memory_remove", "--tool-arg", "match=nothing",
                                      stdio=server, cwd=tmp_path)
        content = called["result"]["structuredContent"]
        assert code != 0 and content["error"]["code"] == "ENTRY_NOT_FOUND"
        assert content["error"]["hint"]
        assert "Traceback" not in err and "Warning" not in err, err
