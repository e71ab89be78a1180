"""Every tool result agrees with the tool's declared output schema: successes and every
error (declined, cancelled, each protocol code), in both protocol eras. Clients check this:
the TypeScript SDK rejects a structuredContent that does not match, so a model would never
see the error code or the hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as t
import pytest
from jsonschema import Draft202012Validator

import filemem
from tests.conftest import ctx
from tests.test_mcp import MODES, Person, run, served

UG = {"track": "user", "scope": "user-global"}


def _check(schemas: dict[str, Any], name: str, result: t.CallToolResult) -> dict[str, Any]:
    content = result.structured_content
    assert content is not None, result
    Draft202012Validator(schemas[name]).validate(content)
    return content


@pytest.mark.parametrize("mode", MODES)
def test_every_result_matches_its_output_schema(tmp_path: Path, mode: str) -> None:
    store = tmp_path / "store"
    filemem.open_store(store, create=True).close()  # policy ask, user/user-global: 2000
    with filemem.open_store(store, write_policy="auto") as p:
        p.add({**UG, "text": "twin one"}, ctx())
        p.add({**UG, "text": "twin two"}, ctx())
    person = Person("approve", "decline", "cancel", "approve", "approve", "approve")

    async def scenario() -> None:
        async with served(store, mode, person=person) as client:
            schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
            assert all(schemas.values())
            seen: dict[str, str] = {}

            async def call(name: str, args: dict[str, Any]) -> None:
                content = _check(schemas, name, await client.call_tool(name, args))
                seen[f"{name} {args}"] = "ok" if content["ok"] else content["error"]["code"]

            await call("memory_add", {"text": "first", **UG})                 # approved
            await call("memory_add", {"text": "declined", **UG})              # declined
            await call("memory_add", {"text": "cancelled", **UG})             # cancelled
            await call("memory_add", {"text": "x" * 2100, **UG})              # over budget
            await call("memory_replace", {"match": "twin", "text": "t", **UG})    # ambiguous
            await call("memory_remove", {"match": "nowhere", **UG})           # not found
            await call("memory_consolidate", {"matches": ["twin one", "twin two"],
                                              "text": "twins", **UG})          # approved
            await call("memory_replace", {"match": "first", "text": "first!", **UG})
            await call("memory_remove", {"match": "twins", **UG})
            await call("memory_add", {"text": "", **UG})                      # invalid input
            await call("memory_add", {"text": 5, "track": "nobody"})          # bad arguments
            await call("memory_query", {"limit": 0})
            await call("memory_query", {"text": "first"})
            await call("memory_budgets", {})
            codes = list(seen.values())
            for expected in ("ok", "WRITE_DENIED", "BUDGET_EXCEEDED", "AMBIGUOUS_MATCH",
                             "ENTRY_NOT_FOUND", "INVALID_INPUT"):
                assert expected in codes, seen

    run(scenario)
