"""`filemem mcp` as an agent's MCP client sees it: the SDK's real client against the server in
a subprocess over stdio, in both protocol eras (2025-11-25 handshake, 2026-07-28 per-request
with input-required round trips), with a scripted person answering the approval prompts."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from mcp import Client, MCPError, StdioServerParameters
from pydantic import FileUrl

import filemem
from filemem.model import workspace_key_of
from filemem.toolspec import WRITE_TOOL_NAMES
from tests.conftest import ctx, git

MODES = ["legacy", "2026-07-28"]  # legacy negotiates 2025-11-25


class Person:
    """Answers elicitation prompts from a script and remembers every message shown.

    An answer is "approve", "decline-in-form" (accept with decision decline), "decline"
    or "cancel"; a callable runs first (the world changing while the person reads)."""

    def __init__(self, *answers: str | Callable[[], None]) -> None:
        self.answers = list(answers)
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        assert isinstance(params, t.ElicitRequestFormParams)
        assert params.requested_schema["required"] == ["decision"]
        # what a client may show the person: about the write, not about filemem's code
        assert params.requested_schema.get("description") in (
            None, "Approve or decline this memory write.")  # (the newer era sends none)
        self.messages.append(params.message)
        answer = self.answers.pop(0)
        while callable(answer):
            answer()
            answer = self.answers.pop(0)
        if answer == "approve":
            return t.ElicitResult(action="accept", content={"decision": "approve"})
        if answer == "decline-in-form":
            return t.ElicitResult(action="accept", content={"decision": "decline"})
        return t.ElicitResult(action=answer)  # type: ignore[arg-type]


def roots_of(path: Path) -> Any:
    async def roots(context: Any) -> t.ListRootsResult:
        return t.ListRootsResult(roots=[t.Root(uri=FileUrl(path.as_uri()), name=path.name)])
    return roots


@contextlib.asynccontextmanager
async def served(store: Path, mode: str, *, person: Person | None = None, roots: Any = None,
                 agent: str | None = "coder", workspace: Path | None = None,
                 cwd: Path | None = None) -> AsyncIterator[Client]:
    args = ["-m", "filemem.cli", "mcp", "--store", str(store)]
    if agent is not None:
        args += ["--agent", agent]
    if workspace is not None:
        args += ["--workspace", str(workspace)]
    params = StdioServerParameters(command=sys.executable, args=args,
                                   cwd=str(cwd or store.parent))
    async with Client(params, mode=mode, elicitation_callback=person,
                      list_roots_callback=roots, read_timeout_seconds=60) as client:
        yield client


def run(scenario: Callable[[], Any]) -> None:
    anyio.run(scenario)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A fresh store (policy ask, default budgets) and the project folder beside it."""
    path = tmp_path / "store"
    filemem.open_store(path, create=True).close()
    (tmp_path / "proj").mkdir()
    return path


@pytest.fixture
def other(store: Path) -> Any:
    """Another process's view of the same store (the test process), writing with auto."""
    p = filemem.open_store(store, write_policy="auto")
    yield p
    p.close()


def err(result: t.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    assert result.structured_content is not None
    error: dict[str, Any] = result.structured_content["error"]
    return error


def ok(result: t.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    assert result.structured_content is not None
    content: dict[str, Any] = result.structured_content
    return content


# ---------------------------------------------------------------- listing


@pytest.mark.parametrize("mode", MODES)
def test_tools_resources_and_prompts_are_listed(store: Path, mode: str) -> None:
    async def scenario() -> None:
        async with served(store, mode) as c:
            assert c.protocol_version == {"legacy": "2025-11-25"}.get(mode, mode)
            tools = {tool.name: tool for tool in (await c.list_tools()).tools}
            resources = (await c.list_resources()).resources
            prompts = (await c.list_prompts()).prompts
        assert set(tools) == {"memory_add", "memory_replace", "memory_remove",
                              "memory_consolidate", "memory_query", "memory_budgets"}
        for name, tool in tools.items():
            props = tool.input_schema.get("properties", {})
            # the session decides who writes and a person decides what is approved
            assert not {"workspace", "workspaceKey", "agent", "agentKey", "approval", "plan",
                        "answer", "session", "source", "policy", "gate"} & set(props), name
            assert tool.output_schema is not None, name
            assert tool.description and len(tool.description) > 80, name
            assert tool.annotations is not None and tool.annotations.open_world_hint is False
        for name in ("memory_query", "memory_budgets"):
            assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
        for name in ("memory_remove", "memory_consolidate", "memory_replace"):
            a = tools[name].annotations
            assert a is not None and a.destructive_hint is True and a.read_only_hint is False
        add = tools["memory_add"]
        assert add.input_schema["required"] == ["text"]
        assert add.input_schema["properties"]["track"]["enum"] == ["user", "agent"]
        assert add.input_schema["properties"]["scope"]["enum"] == ["user-global", "workspace"]
        assert "SAVE" in (add.description or "") and "SKIP" in (add.description or "")
        for code in ("BUDGET_EXCEEDED", "AMBIGUOUS_MATCH"):
            assert code in (add.description or "")
        assert set(tools["memory_consolidate"].input_schema["required"]) == {"matches", "text"}
        assert set(tools["memory_replace"].input_schema["required"]) == {"match", "text"}
        # the snapshot's header names these (filemem.toolspec, read without the SDK)
        assert {n for n in tools if n not in ("memory_query", "memory_budgets")} == \
            set(WRITE_TOOL_NAMES)
        assert [r.uri for r in resources] == ["filemem://snapshot"]
        assert [p.name for p in prompts] == ["memory_snapshot"]
        assert not any("pending" in n or "approve" in n or "polic" in n for n in tools)

    run(scenario)


# ---------------------------------------------------------------- approval


@pytest.mark.parametrize("mode", MODES)
def test_a_short_first_session_leaves_a_whole_store_or_nothing(tmp_path: Path,
                                                                mode: str) -> None:
    """The store is made on a warm-up thread once the client is past ``initialize``; a
    client that lists the tools and goes away at once must not leave the creation's
    temporary folder behind (the server used to exit in the middle of it)."""
    missing = tmp_path / "store"

    async def scenario() -> None:
        async with served(missing, mode) as c:
            await c.list_tools()

    anyio.run(scenario)
    assert [p.name for p in tmp_path.iterdir() if "filemem-init" in p.name] == []
    if missing.exists():  # made whole, or not begun: never half
        with filemem.open_store(missing) as p:
            assert p.list_entries() == []
        git(missing, "fsck", "--strict")
        assert git(missing, "status", "--porcelain") == ""


@pytest.mark.parametrize("mode", MODES)
def test_every_write_asks_the_person(store: Path, other: filemem.Provider, mode: str) -> None:
    person = Person("approve", "decline", "decline-in-form", "cancel")

    async def scenario() -> list[t.CallToolResult]:
        async with served(store, mode, person=person) as c:
            return [await c.call_tool("memory_add", {"text": text, "scope": "user-global",
                                                     "tags": ["drinks"]})
                    for text in ("likes tea", "likes coffee", "likes juice", "likes milk")]

    added, declined, declined_in_form, cancelled = anyio.run(scenario)
    entry = ok(added)["entry"]
    assert entry["text"] == "likes tea" and entry["source"] == "memory-tool"
    assert entry["tags"] == ["drinks"] and ok(added)["usage"]["used"] == 9
    assert [err(r)["details"]["outcome"] for r in (declined, declined_in_form, cancelled)] == \
        ["rejected", "rejected", "cancelled"]
    assert all(err(r)["code"] == "WRITE_DENIED" for r in (declined, declined_in_form, cancelled))
    assert "hint" in err(cancelled)
    # the person saw each full payload, with who asks and what the store is
    assert len(person.messages) == 4
    assert "likes coffee" in person.messages[1] and "agent 'coder'" in person.messages[1]
    assert "Add a memory entry to user/user-global" in person.messages[0]
    # exactly what was approved is in memory; every answer is in the audit trail, nothing more
    assert [e["text"] for e in other.list_entries()] == ["likes tea"]
    rows = [r for r in other.audit_list(20) if r["action"] != "init"]
    assert [(r["action"], r["outcome"].split(" (")[0]) for r in rows] == [
        ("add-denied", "cancelled"), ("add-denied", "rejected"), ("add-denied", "rejected"),
        ("add", "allowed-once")]
    assert all("answered by MCP elicitation" in r["outcome"] for r in rows)
    assert len({r["sessionId"] for r in rows}) == 1
    assert other.store.pending.list() == []


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_ask_stages_the_write(store: Path, other: filemem.Provider,
                                                   mode: str) -> None:
    async def scenario() -> tuple[t.CallToolResult, t.CallToolResult]:
        async with served(store, mode) as c:  # no elicitation callback: no capability
            # an argument the model makes up cannot approve anything: it is refused
            made_up = await c.call_tool("memory_add", {"text": "likes tea",
                                                       "approval": "allowed-once"})
            return made_up, await c.call_tool("memory_add", {"text": "likes tea"})

    made_up, staged_call = anyio.run(scenario)
    refused = err(made_up)
    assert refused["code"] == "INVALID_INPUT"
    assert "`approval` is not one of its arguments" in refused["message"]
    error = err(staged_call)
    assert error["code"] == "WRITE_DENIED"
    assert error["details"]["outcome"] == "pending"
    pid = error["details"]["pendingId"]
    assert "elicitation" in error["message"]
    assert other.list_entries() == []
    staged = other.store.pending.list()
    assert [p["id"] for p in staged] == [pid]
    assert staged[0]["payload"]["text"] == "likes tea"


@pytest.mark.parametrize("mode", MODES)
def test_replace_and_consolidate_show_everything(store: Path, other: filemem.Provider,
                                                 mode: str, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    w = ctx(cwd=str(proj), agent="coder")
    other.add({"track": "agent", "scope": "workspace", "text": "tests: pytest -x"}, w)
    other.add({"track": "agent", "scope": "workspace", "text": "lint: ruff check"}, w)
    other.add({"track": "agent", "scope": "workspace", "text": "types: mypy strict"}, w)
    person = Person("approve", "approve")

    async def scenario() -> tuple[t.CallToolResult, t.CallToolResult]:
        async with served(store, mode, person=person, roots=roots_of(proj)) as c:
            replaced = await c.call_tool("memory_replace", {
                "track": "agent", "scope": "workspace", "match": "pytest",
                "text": "tests: pytest -x -q\nsecond line"})
            merged = await c.call_tool("memory_consolidate", {
                "track": "agent", "scope": "workspace", "matches": ["ruff", "mypy"],
                "text": "checks: ruff check; mypy strict"})
            return replaced, merged

    replaced, merged = anyio.run(scenario)
    assert ok(replaced)["previous"]["text"] == "tests: pytest -x"
    assert ("│ from:\n│ tests: pytest -x\n│\n│ to:\n│ tests: pytest -x -q\n│ second line\n"
            "└─ end of text") in person.messages[0]
    assert "Replace a memory entry in agent/workspace" in person.messages[0]
    assert [r["text"] for r in ok(merged)["removed"]] == ["lint: ruff check",
                                                          "types: mypy strict"]
    plan = person.messages[1]
    for part in ("│ remove: ruff\n│ lint: ruff check", "│ remove: mypy\n│ types: mypy strict",
                 "│ new text: checks: ruff check; mypy strict"):
        assert part in plan
    assert sorted(e["text"] for e in other.list_entries()) == [
        "checks: ruff check; mypy strict", "tests: pytest -x -q\nsecond line"]


@pytest.mark.parametrize("mode", MODES)
def test_the_write_is_the_one_the_person_saw(store: Path, other: filemem.Provider,
                                             mode: str, tmp_path: Path) -> None:
    """The entry changes (another process) while the person reads the prompt. Handshake
    era: the provider refuses, since the target is no longer the approved one. 2026-07-28:
    the answer belongs to a question that is no longer true, so the person is asked again
    with the new text, and only that second answer writes."""
    w = ctx(cwd=str(tmp_path / "proj"))
    other.add({"track": "user", "scope": "user-global", "text": "editor: vim"}, w)

    def meanwhile() -> None:
        other.replace({"track": "user", "scope": "user-global", "match": "editor",
                       "text": "editor: helix"}, w)

    person = Person(meanwhile, "approve", "approve")

    async def scenario() -> t.CallToolResult:
        async with served(store, mode, person=person) as c:
            return await c.call_tool("memory_replace", {
                "scope": "user-global", "match": "editor", "text": "editor: emacs"})

    result = anyio.run(scenario)
    assert "│ from:\n│ editor: vim\n" in person.messages[0]
    if mode == "legacy":
        assert err(result)["code"] == "ENTRY_NOT_FOUND"
        assert "changed while approval was pending" in err(result)["message"]
        assert [e["text"] for e in other.list_entries()] == ["editor: helix"]
        assert len(person.messages) == 1
    else:
        assert len(person.messages) == 2
        assert "│ from:\n│ editor: helix\n│\n│ to:\n│ editor: emacs" in person.messages[1]
        assert ok(result)["previous"]["text"] == "editor: helix"
        assert [e["text"] for e in other.list_entries()] == ["editor: emacs"]


# ---------------------------------------------------------------- errors a model branches on


@pytest.mark.parametrize("mode", MODES)
def test_budget_and_ambiguity_errors_carry_codes(store: Path, other: filemem.Provider,
                                                 mode: str, tmp_path: Path) -> None:
    w = ctx(cwd=str(tmp_path / "proj"))
    other.add({"track": "user", "scope": "user-global", "text": "x" * 1990}, w)
    other.add({"track": "agent", "scope": "user-global", "text": "uses pnpm for node"}, w)
    other.add({"track": "agent", "scope": "user-global", "text": "pnpm store is shared"}, w)
    person = Person()  # nobody must be asked for writes that cannot happen

    async def scenario() -> list[t.CallToolResult]:
        async with served(store, mode, person=person) as c:
            return [
                await c.call_tool("memory_add", {"scope": "user-global", "text": "x" * 11}),
                await c.call_tool("memory_remove", {"track": "agent", "scope": "user-global",
                                                    "match": "PNPM"}),
                await c.call_tool("memory_remove", {"track": "agent", "scope": "user-global",
                                                    "match": "yarn"}),
                await c.call_tool("memory_add", {"text": "ok", "tags": ["x" * 40]}),
            ]

    budget, ambiguous, missing, invalid = anyio.run(scenario)
    assert err(budget)["code"] == "BUDGET_EXCEEDED"
    assert err(budget)["details"] == {"track": "user", "scope": "user-global", "used": 1990,
                                      "limit": 2000, "needed": 2001}
    assert "memory_consolidate" in err(budget)["hint"]
    assert err(ambiguous)["code"] == "AMBIGUOUS_MATCH"
    assert err(ambiguous)["details"]["candidates"] == 2
    assert sorted(err(ambiguous)["details"]["sample"]) == ["pnpm store is shared",
                                                           "uses pnpm for node"]
    assert "longer substring" in err(ambiguous)["hint"]
    assert err(missing)["code"] == "ENTRY_NOT_FOUND"
    assert err(invalid)["code"] == "INVALID_INPUT"
    assert person.messages == []
    assert len(other.list_entries()) == 3


@pytest.mark.parametrize("mode", MODES)
def test_arguments_that_do_not_fit_the_schema_are_invalid_input(store: Path, mode: str
                                                                ) -> None:
    """Arguments the input schema refuses answer a structured INVALID_INPUT tool error whose
    one-line message names the argument and what it takes, not pydantic's text; an
    unknown tool, prompt or resource is a JSON-RPC invalid-params error naming what exists."""
    person = Person()

    async def scenario() -> tuple[list[t.CallToolResult], list[MCPError]]:
        async with served(store, mode, person=person) as c:
            results = [
                await c.call_tool("memory_add", {"text": ["a", "list"]}),
                await c.call_tool("memory_add", {"text": "x", "track": "people",
                                                 "scope": "global"}),
                await c.call_tool("memory_remove", {"scope": "workspace"}),
                await c.call_tool("memory_replace", {"match": "a", "text": "b",
                                                     "tags": ["ok", 7]}),
                await c.call_tool("memory_query", {"limit": "ten"}),
            ]
            refused = []
            for request in (c.call_tool("memory_forget", {}), c.get_prompt("memory_dump"),
                            c.read_resource("filemem://nope")):
                with pytest.raises(MCPError) as raised:
                    await request
                refused.append(raised.value)
        return results, refused

    (wrong_type, two_enums, missing, item, number), (tool, prompt, resource) = \
        anyio.run(scenario)
    expected = {
        "`text` must be a string (got [\"a\", \"list\"])": wrong_type,
        "`track` must be one of \"user\", \"agent\" (got \"people\"); `scope` must be one of "
        "\"user-global\", \"workspace\" (got \"global\")": two_enums,
        "`match` is required (a string)": missing,
        "item 1 of `tags` must be a string (got 7)": item,
        "`limit` must be a whole number of at least 1, or left out (got \"ten\")": number,
    }
    for says, result in expected.items():
        error = err(result)
        assert error["code"] == "INVALID_INPUT", error
        assert says in error["message"] and "\n" not in error["message"], error["message"]
        assert "validation error" not in error["message"]
        assert error["hint"] and error["details"]["arguments"]
        assert result.content and isinstance(result.content[0], t.TextContent)
        assert json.loads(result.content[0].text) == result.structured_content
    assert err(missing)["details"] == {"tool": "memory_remove", "arguments": [
        {"argument": "match", "expected": "a string", "missing": True}]}
    assert tool.error.code == prompt.error.code == resource.error.code == -32602
    assert "memory_add" in tool.error.message and "memory_snapshot" in prompt.error.message
    assert resource.error.message == ("unknown resource 'filemem://nope'; filemem's resource "
                                      "is filemem://snapshot")
    assert person.messages == []


@pytest.mark.parametrize("mode", MODES)
def test_a_miss_names_other_layers_the_session_sees_and_nothing_else(
        store: Path, other: filemem.Provider, mode: str, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    other.add({"track": "agent", "scope": "workspace", "text": "CI runs on Debian 12"},
              ctx(cwd=str(proj)))
    other.add({"track": "user", "scope": "workspace", "text": "Debian elsewhere"},
              ctx(cwd=str(tmp_path / "elsewhere")))
    other.add({"track": "user", "scope": "user-global", "text": "Debian of the reviewer"},
              ctx(cwd=str(proj), agent="reviewer"))

    async def scenario() -> t.CallToolResult:
        async with served(store, mode, person=Person(), workspace=proj) as c:
            return await c.call_tool("memory_remove", {"scope": "workspace", "match": "Debian"})

    e = err(anyio.run(scenario))
    assert e["code"] == "ENTRY_NOT_FOUND"
    assert e["details"]["elsewhere"] == [{"track": "agent", "scope": "workspace",
                                          "workspaceKey": str(proj), "agentKey": "",
                                          "entries": 1}]
    assert f'searched the shared layer and agent "coder"\'s layer of workspace "{proj}"' \
        in e["message"]
    assert "it is in agent/workspace" in e["message"] and "details.elsewhere" in e["hint"]
    # another workspace's entry and another agent's are not this session's to know of
    assert "elsewhere" not in e["message"] and "reviewer" not in json.dumps(e)


@pytest.mark.parametrize("mode", MODES)
def test_head_moved_by_another_process_is_served(store: Path, other: filemem.Provider,
                                                 mode: str, tmp_path: Path) -> None:
    w = ctx(cwd=str(tmp_path / "proj"))

    async def scenario() -> list[dict[str, Any]]:
        seen = []
        async with served(store, mode) as c:
            seen.append(ok(await c.call_tool("memory_query", {})))
            other.add({"track": "user", "scope": "user-global", "text": "prefers tabs"}, w)
            seen.append(ok(await c.call_tool("memory_query", {"text": "TABS"})))
            other.replace({"track": "user", "scope": "user-global", "match": "tabs",
                           "text": "prefers spaces"}, w)
            seen.append(ok(await c.call_tool("memory_query", {"scope": "user-global"})))
            seen.append(ok(await c.call_tool("memory_budgets", {})))
        return seen

    empty, added, replaced, budgets = anyio.run(scenario)
    assert empty["entries"] == [] and empty["total"] == 0
    assert [e["text"] for e in added["entries"]] == ["prefers tabs"]
    assert [e["text"] for e in replaced["entries"]] == ["prefers spaces"]
    assert budgets["budgets"][0] == {"track": "user", "scope": "user-global", "used": 14,
                                     "limit": 2000}
    recalled = [r for r in other.audit_list(20) if r["action"] == "recalled"]
    assert len(recalled) == 3 and recalled[0]["sessionId"].startswith("mcp-")


# ---------------------------------------------------------------- session: workspace, snapshot


@pytest.mark.parametrize("mode", MODES)
def test_roots_decide_the_workspace(store: Path, other: filemem.Provider, mode: str,
                                    tmp_path: Path) -> None:
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    elsewhere.mkdir()
    w = ctx(cwd=str(proj))
    other.add({"track": "agent", "scope": "workspace", "text": "proj uses make"}, w)
    other.add({"track": "agent", "scope": "workspace", "text": "other uses just"},
              ctx(cwd=str(elsewhere)))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with served(store, mode, person=Person("approve"), roots=roots_of(proj),
                          cwd=elsewhere) as c:
            seen = ok(await c.call_tool("memory_query", {"track": "agent"}))
            added = ok(await c.call_tool("memory_add", {"track": "agent", "text": "ci: gh"}))
        return seen, added

    seen, added = anyio.run(scenario)
    assert [e["text"] for e in seen["entries"]] == ["proj uses make"]
    stored = {e["id"]: e for e in other.list_entries()}[added["entry"]["id"]]
    assert stored["workspaceKey"] == workspace_key_of(str(proj))
    assert stored["agentKey"] == "coder"


def test_without_roots_the_workspace_option_decides(store: Path, other: filemem.Provider,
                                                    tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    other.add({"track": "agent", "scope": "workspace", "text": "proj uses make"},
              ctx(cwd=str(proj)))

    async def scenario() -> dict[str, Any]:
        async with served(store, "legacy", workspace=proj, agent=None) as c:
            return ok(await c.call_tool("memory_query", {}))

    assert [e["text"] for e in anyio.run(scenario)["entries"]] == ["proj uses make"]


@pytest.mark.parametrize("mode", MODES)
def test_snapshot_is_frozen_and_audited_byte_for_byte(store: Path, other: filemem.Provider,
                                                      mode: str, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    w = ctx(cwd=str(proj))
    other.add({"track": "user", "scope": "user-global", "text": "偏好中文回复 🙂\r\nline two"}, w)
    other.add({"track": "agent", "scope": "workspace", "text": "tests first"}, w)

    async def scenario() -> tuple[str, str, str]:
        async with served(store, mode, person=Person("approve"), roots=roots_of(proj)) as c:
            if mode != "legacy":  # a 2026-07-28 session learns its roots through a tool call
                await c.call_tool("memory_query", {"text": "nothing"})
            first = (await c.read_resource("filemem://snapshot")).contents[0]
            await c.call_tool("memory_add", {"scope": "user-global", "text": "later fact"})
            again = (await c.read_resource("filemem://snapshot")).contents[0]
            prompt = await c.get_prompt("memory_snapshot")
        assert isinstance(first, t.TextResourceContents)
        assert isinstance(again, t.TextResourceContents)
        content = prompt.messages[0].content
        assert isinstance(content, t.TextContent)
        return first.text, again.text, content.text

    first, again, prompt = anyio.run(scenario)
    # filemem names itself and the tools this server lists (not the reference's "memory tool")
    assert first.startswith("[filemem: frozen memory snapshot") and "dsh-memento" not in first
    assert first.splitlines()[0].endswith(
        "use the memory_add, memory_replace, memory_remove or memory_consolidate tool.]")
    assert "偏好中文回复 🙂\r\nline two" in first and "- tests first" in first
    assert "later fact" not in first
    assert again == first and prompt == first
    rows = [r for r in other.audit_list(50) if r["action"] == "snapshot"]
    assert len(rows) == 1
    assert rows[0]["text"] == first  # byte-identical to what the client received
    assert rows[0]["sessionId"].startswith("mcp-")


@pytest.mark.parametrize("mode", MODES)
def test_snapshot_is_frozen_at_its_first_read(store: Path, mode: str) -> None:
    """As the README says: rendered at the session's first read, so a write this session
    made before that read is in it, and one after is not."""
    async def scenario() -> str:
        async with served(store, mode, person=Person("approve", "approve")) as c:
            ok(await c.call_tool("memory_add", {"scope": "user-global", "text": "before"}))
            first = (await c.read_resource("filemem://snapshot")).contents[0]
            ok(await c.call_tool("memory_add", {"scope": "user-global", "text": "after"}))
            prompt = (await c.get_prompt("memory_snapshot")).messages[0].content
        assert isinstance(first, t.TextResourceContents) and isinstance(prompt, t.TextContent)
        assert prompt.text == first.text
        return first.text

    text = anyio.run(scenario)
    assert "- before" in text and "after" not in text


@pytest.mark.parametrize("mode", MODES)
def test_the_store_policy_decides_who_is_asked(store: Path, other: filemem.Provider,
                                               mode: str) -> None:
    """The policy is the owner's configuration (committed filemem.yaml), read at each call:
    auto writes without a prompt, off refuses without one, ask asks."""
    config = store / "filemem.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "writePolicies: {}", "writePolicies:\n  agent/workspace: auto\n  user/workspace: off"),
        encoding="utf-8")
    git(store, "commit", "-qam", "owner: agents may write workspace facts freely")
    person = Person("approve")

    async def scenario() -> list[t.CallToolResult]:
        async with served(store, mode, person=person) as c:
            return [await c.call_tool("memory_add", {"track": track, "scope": scope,
                                                     "text": f"{track}/{scope} fact"})
                    for track, scope in (("agent", "workspace"), ("user", "workspace"),
                                         ("user", "user-global"))]

    auto, off, ask = anyio.run(scenario)
    assert ok(auto)["entry"]["text"] == "agent/workspace fact"
    # the protocol's outcome, as for a person's no; the details and the hint say that the
    # owner's policy refused it, and where that is set
    assert err(off)["details"] == {"outcome": "rejected", "policy": "off",
                                   "policyKey": "user/workspace"}
    assert err(off)["hint"].startswith(
        "The user's write policy refused this write (`user/workspace: off` under "
        "writePolicies in their memory store's filemem.yaml); nobody was asked")
    assert ok(ask)["entry"]["text"] == "user/user-global fact"
    assert len(person.messages) == 1 and "user/user-global fact" in person.messages[0]
    labels = {r["action"]: r["outcome"] for r in other.audit_list(10)}
    assert labels["add-denied"].startswith("rejected (via approval, writePolicy off for ")
