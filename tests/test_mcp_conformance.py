"""The official MCP conformance tool against `filemem mcp --http`.

`@modelcontextprotocol/conformance` (pinned in tests/node) runs every server scenario it has
(`--suite all`, pending ones included) against a real `filemem mcp --http PORT`. Each
scenario is either one that applies, and then every check of it must pass, or one of the
README's list of scenarios that do not apply, each for a reason this test confirms on the
running server (the fixture it needs is absent, or the optional capability it tests is not
offered). A scenario the tool gains in a new version is in neither set and fails the test
until someone decides where it belongs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, free_port
from tests.nodejs import NODE_DIR, NodeTools, node_tools

TOKEN = "conformance-test-token"

# every check of these passes
APPLICABLE = frozenset({
    "server-initialize", "ping", "tools-list", "resources-list", "prompts-list",
    "server-sse-multiple-streams", "dns-rebinding-protection",
})

# scenario -> what it needs that filemem does not have (confirmed on the server below):
# a fixture tool, prompt, resource or resource template of the tool's reference server, or
# an optional capability
NOT_APPLICABLE: dict[str, tuple[str, str]] = {
    "logging-set-level": ("capability", "logging"),
    "completion-complete": ("capability", "completions"),
    "tools-call-simple-text": ("tool", "test_simple_text"),
    "tools-call-image": ("tool", "test_image_content"),
    "tools-call-audio": ("tool", "test_audio_content"),
    "tools-call-embedded-resource": ("tool", "test_embedded_resource"),
    "tools-call-mixed-content": ("tool", "test_multiple_content_types"),
    "tools-call-with-logging": ("tool", "test_tool_with_logging"),
    "tools-call-error": ("tool", "test_error_handling"),
    "tools-call-with-progress": ("tool", "test_tool_with_progress"),
    "tools-call-sampling": ("tool", "test_sampling"),
    "tools-call-elicitation": ("tool", "test_elicitation"),
    "json-schema-2020-12": ("tool", "json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": ("tool", "test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": ("tool", "test_elicitation_sep1330_enums"),
    "server-sse-polling": ("tool", "test_reconnection"),
    "resources-read-text": ("resource", "test://static-text"),
    "resources-read-binary": ("resource", "test://static-binary"),
    "resources-templates-read": ("resource template", "test://template/{id}/data"),
    "resources-subscribe": ("capability", "resources.subscribe"),
    "resources-unsubscribe": ("capability", "resources.subscribe"),
    "prompts-get-simple": ("prompt", "test_simple_prompt"),
    "prompts-get-with-args": ("prompt", "test_prompt_with_arguments"),
    "prompts-get-embedded-resource": ("prompt", "test_prompt_with_embedded_resource"),
    "prompts-get-with-image": ("prompt", "test_prompt_with_image"),
}

README_HEADING = "### Checked with the official MCP conformance tool"


@dataclass(frozen=True)
class Server:
    url: str
    process: subprocess.Popen[bytes]



@pytest.fixture
def tools() -> NodeTools:
    """Node and the pinned conformance tool (installed, or the test skipped, first)."""
    return node_tools()


@pytest.fixture
def server(tools: NodeTools, tmp_path: Path) -> Iterator[Server]:
    """A real `filemem mcp --http` on a fresh store, with the token fixed by the env."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "filemem.cli", "mcp", "--store", str(tmp_path / "store"),
         "--http", str(port), "--workspace", str(tmp_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        cwd=tmp_path, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
                           "FILEMEM_MCP_TOKEN": TOKEN})
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline().decode()  # printed once options and token are settled
        assert f"serving http://127.0.0.1:{port}/mcp" in first, first
        deadline = time.monotonic() + 30
        while True:  # the line comes just before the socket is bound: wait for the listener
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the HTTP server did not start listening"
                time.sleep(0.02)
        yield Server(f"http://127.0.0.1:{port}/mcp", proc)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _conformance(tools: NodeTools, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.node), "--import", str(NODE_DIR / "bearer-header.mjs"),
         str(tools.bin("conformance")), *args],
        cwd=out, env={**tools.env(), "FILEMEM_MCP_TOKEN": TOKEN, "NO_COLOR": "1"},
        capture_output=True, text=True, timeout=240)


def _results(out: Path, scenarios: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks, from the tool's `-o` folder (server-<scenario>-<time>/)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for folder in out.iterdir():
        for name in scenarios:
            if re.fullmatch(rf"server-{re.escape(name)}-\d{{4}}-\d\d-\d\dT[\d-]+Z", folder.name):
                checks = folder / "checks.json"
                found[name] = json.loads(checks.read_text()) if checks.exists() else []
    return found


def _readme_not_applicable() -> list[str]:
    """The scenario names the README lists as not applying (`- `name`: why` lines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert README_HEADING in text
    section = text.split(README_HEADING, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^- `([a-z0-9-]+)`: \S", section, flags=re.MULTILINE)


def _what_the_server_has(url: str) -> dict[str, Any]:
    async def ask() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
            caps = c.server_capabilities
            return {
                "capability": {
                    "logging": caps.logging is not None,
                    "completions": caps.completions is not None,
                    "resources.subscribe": bool(caps.resources and caps.resources.subscribe),
                },
                "tool": {t.name for t in (await c.list_tools()).tools},
                "prompt": {p.name for p in (await c.list_prompts()).prompts},
                "resource": {str(r.uri) for r in (await c.list_resources()).resources},
                "resource template": {
                    t.uri_template for t in (await c.list_resource_templates()).resource_templates},
            }
    return anyio.run(ask)


def test_every_applicable_conformance_scenario_passes(tools: NodeTools, server: Server,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    listed = _conformance(tools, out, "list", "--server")
    assert listed.returncode == 0, listed.stderr
    scenarios = re.findall(r"^  - (\S+)", listed.stdout, flags=re.MULTILINE)
    assert len(scenarios) == len(set(scenarios)) >= len(APPLICABLE)
    # every scenario the tool has is decided: applies, or does not apply for a stated reason
    assert not APPLICABLE & NOT_APPLICABLE.keys()
    assert sorted(scenarios) == sorted(APPLICABLE | NOT_APPLICABLE.keys()), (
        f"new: {sorted(set(scenarios) - APPLICABLE - NOT_APPLICABLE.keys())}, "
        f"gone: {sorted((APPLICABLE | NOT_APPLICABLE.keys()) - set(scenarios))}")
    assert sorted(_readme_not_applicable()) == sorted(NOT_APPLICABLE)

    run = _conformance(tools, out, "server", "--url", server.url, "--suite", "all",
                       "-o", str(out))
    assert f"Running all suite ({len(scenarios)} scenarios)" in run.stdout, run.stdout + run.stderr
    results = _results(out, scenarios)
    assert all(results.get(name) for name in APPLICABLE), (
        f"no checks from {sorted(n for n in APPLICABLE if not results.get(n))}:\n"
        f"{run.stdout[-3000:]}{run.stderr[-3000:]}")
    failed = {name: [(c["id"], c["status"], c.get("errorMessage")) for c in checks
                     if c["status"] not in ("SUCCESS", "INFO")]
              for name, checks in results.items() if name in APPLICABLE}
    assert failed == {name: [] for name in APPLICABLE}, json.dumps(failed, indent=1)
    # not a check passed by accident: each applicable scenario has one that succeeded
    assert all(any(c["status"] == "SUCCESS" for c in results[name]) for name in APPLICABLE)
    # the DNS-rebinding check refused the foreign Host for itself, not for want of the token
    rebinding = {c["id"]: c["details"]["statusCode"] for c in results["dns-rebinding-protection"]}
    assert rebinding == {"localhost-host-rebinding-rejected": 421,
                         "localhost-host-valid-accepted": 200}

    # why the others do not apply holds on this server
    has = _what_the_server_has(server.url)
    wrong = {name: need for name, (kind, need) in NOT_APPLICABLE.items()
             if (has[kind][need] if kind == "capability" else need in has[kind])}
    assert wrong == {}, f"these apply now: move them to APPLICABLE and out of the README: {wrong}"
    assert server.process.poll() is None  # it served every scenario and is still up
