"""`filemem connect hermes` / `filemem disconnect hermes`, and the plugin inside the real
Hermes Agent (tests/hermes_agent.py installs the pinned ``hermes-agent`` into a venv of its
own): Hermes' discovery finds it, its memory manager loads it, the system prompt holds the
audited snapshot byte for byte, tool calls and Hermes' own memory writes reach filemem's
gate and wait as pending approvals; config.yaml is edited in place and given back."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner import hermes as connect_mod
from filemem.toolspec import WRITE_TOOL_NAMES
from tests.conftest import ROOT, run_cli
from tests.hermes_agent import hermes_agent

CONFIG = """\
# Hermes Agent configuration (hand-edited)
model: ''
toolsets:
  - hermes-cli
memory:
  memory_enabled: true   # MEMORY.md
  user_profile_enabled: true
  memory_char_limit: 2200
  provider: ''
delegation:
  provider: ''
"""


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes-home"
    h.mkdir()
    (h / "config.yaml").write_text(CONFIG, encoding="utf-8")
    return h


@pytest.fixture
def store(tmp_path: Path) -> Path:
    s = tmp_path / "store"
    with filemem.open_store(s, create=True, write_policy="auto") as p:
        p.add({"track": "user", "scope": "user-global", "text": "Prefers concise answers"},
              filemem.write_context(session_id="seed", cwd="/x"))
        p.add({"track": "agent", "scope": "user-global", "text": "Uses fish as the shell"},
              filemem.write_context(session_id="seed", cwd="/x", agent="hermes"))
    return s


def cli(home: Path, *args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, store=store, env={"HERMES_HOME": str(home)})


def files(home: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under ``home``."""
    return {str(p.relative_to(home)): p.read_bytes() if p.is_file() else None
            for p in sorted(home.rglob("*"))}


# ---------------------------------------------------------------- connect, on disk


def test_connect_twice_then_disconnect_gives_every_byte_back(home: Path, store: Path) -> None:
    before = files(home)
    out = cli(home, "connect", "hermes", store=store)
    assert out.returncode == 0, out.stderr
    assert "Connected Hermes Agent to filemem" in out.stdout
    assert "memory.provider: filemem (was: Hermes' built-in memory only)" in out.stdout
    plugin = home / "plugins" / "filemem"
    assert (plugin / "__init__.py").read_bytes() == connect_mod.plugin_source()
    assert "kind: exclusive" in (plugin / "plugin.yaml").read_text()
    settings = json.loads((plugin / "filemem.json").read_text())
    assert settings["store"] == str(store) and settings["agent"] == "hermes"
    assert Path(settings["python"]).is_file()
    # only the value changed: every other line, comment and quote as it was
    assert (home / "config.yaml").read_text() == CONFIG.replace(
        "  provider: ''\ndelegation", "  provider: filemem\ndelegation")
    connected = files(home)
    stamps = {p: os.stat(home / p).st_mtime_ns for p in connected}
    again = cli(home, "connect", "hermes", store=store)
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout
    assert files(home) == connected
    assert {p: os.stat(home / p).st_mtime_ns for p in connected} == stamps  # not rewritten
    off = cli(home, "disconnect", "hermes")
    assert off.returncode == 0, off.stderr
    assert "back to Hermes' built-in memory only" in off.stdout
    assert files(home) == before
    assert not (home / "plugins" / "filemem").exists()
    assert "not connected" in cli(home, "disconnect", "hermes").stdout


SHAPES = {
    "no provider key": "memory:\n  memory_enabled: true\n  # a comment\n  user_char_limit: 1375\n",
    "no memory section": "# top\nmodel: ''\ntoolsets:\n- hermes-cli\n",
    "double-quoted, with a comment": 'memory:\n  provider: "honcho"   # was honcho\nx: 1\n',
    "CRLF line ends": "# hi\r\nmemory:\r\n  provider: ''\r\n  memory_enabled: true\r\n",
    "byte-order mark, four-space indent": "\ufeffmemory:\n    provider: mem0\n    a: 1\n",
    "no final newline": "memory:\n  provider: ''",
    "empty file": "",
    "null values kept as written": "a: ~\nb:\nc: null\nmemory:\n  provider:\n",
}

def test_connect_offers_hermes_own_memory_until_it_is_in_filemem(home: Path,
                                                                  store: Path) -> None:
    """Hermes' own MEMORY.md / USER.md: connect names the import (with this store), and
    once that import is done, says the memory is in filemem instead of offering it again."""
    memories = home / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_text("Deploys go through staging first\n", encoding="utf-8")
    out = cli(home, "connect", "hermes", store=store)
    assert out.returncode == 0, out.stderr
    offered = f"filemem import --adapter hermes-memory-md {memories}/ --agent hermes --store " \
        f"{store}"
    assert f"run: {offered}" in out.stdout
    assert cli(home, *offered.split()[1:], "--yes").returncode == 0  # as printed
    assert cli(home, "disconnect", "hermes").returncode == 0
    again = cli(home, "connect", "hermes", store=store)
    assert again.returncode == 0, again.stderr
    assert "is already in filemem" in again.stdout and "filemem import" not in again.stdout



@pytest.mark.parametrize("text", list(SHAPES.values()), ids=list(SHAPES))
def test_config_shapes_round_trip_byte_for_byte(home: Path, store: Path, text: str) -> None:
    path = home / "config.yaml"
    path.write_bytes(text.encode("utf-8"))
    out = cli(home, "connect", "hermes", store=store)
    assert out.returncode == 0, out.stderr
    new = path.read_bytes().decode("utf-8")
    data, old = _yaml(new.removeprefix("\ufeff")), _yaml(text.removeprefix("\ufeff")) or {}
    assert data["memory"]["provider"] == "filemem"
    old_memory = old.get("memory") or {}
    assert {**old, "memory": {**old_memory, "provider": "filemem"}} == data
    for line in text.splitlines():  # comments and every other line kept, in order
        if "provider" not in line:
            assert line in new.splitlines()
    assert ("\r\n" in new) == ("\r\n" in text) and new.startswith("\ufeff") == \
        text.startswith("\ufeff")
    assert cli(home, "disconnect", "hermes").returncode == 0
    assert path.read_bytes() == text.encode("utf-8")


def test_a_flow_style_section_is_rewritten_by_ruamel_keeping_its_data(home: Path,
                                                                       store: Path) -> None:
    path = home / "config.yaml"
    path.write_text("# mine\nmemory: {memory_enabled: true, provider: ''}\nz: [1, 2]\n")
    assert cli(home, "connect", "hermes", store=store).returncode == 0
    assert "# mine" in path.read_text()
    assert _yaml(path.read_text()) == {"memory": {"memory_enabled": True,
                                                  "provider": "filemem"}, "z": [1, 2]}
    assert cli(home, "disconnect", "hermes").returncode == 0
    assert _yaml(path.read_text()) == {"memory": {"memory_enabled": True, "provider": ""},
                                       "z": [1, 2]}


def test_no_config_file_is_created_then_removed(home: Path, store: Path) -> None:
    (home / "config.yaml").unlink()
    assert cli(home, "connect", "hermes", store=store).returncode == 0
    assert _yaml((home / "config.yaml").read_text()) == {"memory": {"provider": "filemem"}}
    out = cli(home, "disconnect", "hermes")
    assert out.returncode == 0 and "filemem had created it" in out.stdout
    assert files(home) == {}


def test_another_provider_is_replaced_and_put_back(home: Path, store: Path) -> None:
    path = home / "config.yaml"
    text = CONFIG.replace("  provider: ''\ndelegation", '  provider: "honcho"  # cloud\ndelegation')
    path.write_text(text)
    out = cli(home, "connect", "hermes", store=store)
    assert "filemem replaces 'honcho'" in out.stdout
    assert "  provider: filemem  # cloud\n" in path.read_text()
    assert "back to the memory provider 'honcho'" in cli(home, "disconnect", "hermes").stdout
    assert path.read_text() == text


def test_disconnect_leaves_a_provider_chosen_since(home: Path, store: Path) -> None:
    assert cli(home, "connect", "hermes", store=store).returncode == 0
    path = home / "config.yaml"
    path.write_text(path.read_text().replace("provider: filemem", "provider: mem0"))
    edited = path.read_bytes()
    out = cli(home, "disconnect", "hermes")
    assert out.returncode == 0
    assert "memory.provider is 'mem0', not filemem" in out.stdout
    assert path.read_bytes() == edited
    assert not (home / "plugins" / "filemem").exists()


BAD = {
    "syntax error": ("memory:\n  provider: ''\n  bad: [1, 2\nother: 1\n", 4),
    "a key twice": ("delegation:\n  api_key: sk-one\n  api_key: sk-two\n", 3),
    "memory is a list": ("memory:\n- provider\n", 1),
    "memory is a number": ("model: x\nmemory: 3\n", 2),
    "top level is a list": ("- memory\n", 1),
    "not UTF-8": ("model: '\udcff'\n", 1),
}


@pytest.mark.parametrize(("text", "line"), list(BAD.values()), ids=list(BAD))
def test_invalid_config_is_never_written(home: Path, store: Path, text: str,
                                         line: int) -> None:
    path = home / "config.yaml"
    raw = text.encode("utf-8", "surrogateescape")
    path.write_bytes(raw)
    out = cli(home, "connect", "hermes", store=store)
    assert out.returncode == 1
    assert "CONFIG_INVALID" in out.stderr and str(path) in out.stderr
    assert f"{path}, line {line}: " in out.stderr
    assert "it was not changed (nor was anything else)" in out.stderr
    assert "sk-" not in out.stderr  # a value (a secret, maybe) is never shown
    assert path.read_bytes() == raw
    assert not (home / "plugins").exists()


def test_missing_hermes_is_explained(tmp_path: Path, store: Path) -> None:
    missing = tmp_path / "no-hermes-here"
    out = cli(missing, "connect", "hermes", store=store)
    assert out.returncode == 1
    assert "AGENT_NOT_FOUND" in out.stderr and str(missing) in out.stderr
    assert "pip install hermes-agent" in out.stderr and "HERMES_HOME" in out.stderr
    assert not missing.exists()
    new_store = tmp_path / "new-store"  # a store to be made: not made by a refused connect
    out = cli(missing, "connect", "hermes", store=new_store)
    assert out.returncode == 1 and "AGENT_NOT_FOUND" in out.stderr
    assert not new_store.exists()


def test_a_plugin_folder_that_is_not_filemems_is_left_alone(home: Path, store: Path) -> None:
    theirs = home / "plugins" / "filemem"
    theirs.mkdir(parents=True)
    (theirs / "__init__.py").write_text("# someone else's MemoryProvider\n")
    before = files(home)
    out = cli(home, "connect", "hermes", store=store)
    assert out.returncode == 1 and "NAME_TAKEN" in out.stderr
    assert files(home) == before
    assert "not written by filemem" in cli(home, "disconnect", "hermes").stdout
    assert files(home) == before


@pytest.mark.parametrize("step", range(4))
def test_connect_stopped_at_any_write_leaves_everything_as_it_was(home: Path, store: Path,
                                                                  step: int) -> None:
    before = files(home)
    writes: list[str] = []

    def failing(path: str, data: bytes, mode: int) -> None:
        if len(writes) == step:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        writes.append(path)
        connect_mod.atomic.atomic_write(path, data, durable=True, mode=mode)

    target = connect_mod.Target(str(home), str(store))
    with pytest.raises(filemem.ConnectError) as err:
        connect_mod.connect(target, write=failing)
    assert err.value.code == "CONFIG_UNWRITABLE" and "put back" in err.value.message
    assert files(home) == before
    assert not (home / "plugins").exists()
    assert len(writes) == step  # the failure came at that step, after the others
    connect_mod.connect(target)  # and running it again finishes the job
    assert _yaml((home / "config.yaml").read_text())["memory"]["provider"] == "filemem"


def test_disconnect_that_cannot_write_config_stays_connected(home: Path, store: Path) -> None:
    target = connect_mod.Target(str(home), str(store))
    connect_mod.connect(target)
    connected = files(home)

    def failing(path: str, data: bytes, mode: int) -> None:
        raise OSError(errno.EACCES, "Permission denied", path)

    with pytest.raises(filemem.ConnectError):
        connect_mod.disconnect(str(home), write=failing)
    assert files(home) == connected


# ---------------------------------------------------------------- the plugin's channel


def _hook(store: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "filemem", "hook", "hermes", "--store",
                          str(store)], input=b"".join(lines), capture_output=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def _req(rid: int, method: str, **params: Any) -> bytes:
    return json.dumps({"id": rid, "method": method, "params": params}).encode() + b"\n"


def test_an_empty_snapshot_adds_nothing_to_the_system_prompt(tmp_path: Path) -> None:
    """Nothing visible: the prompt block is '' (Hermes leaves it out), recorded as such."""
    empty = tmp_path / "empty-store"
    filemem.open_store(empty, create=True).close()
    (answer,) = _hook(empty, [_req(1, "prompt", session={"id": "hermes-e", "cwd": "/x"})])
    assert answer["result"] == {"text": ""}
    with filemem.open_store(empty) as p:
        (row,) = [r for r in p.audit_list(50) if r["action"] == "snapshot"]
    assert row["text"] == "" and row["sessionId"] == "hermes-e"


def test_the_channel_survives_hostile_requests_and_keeps_text_exact(store: Path) -> None:
    hostile = "line one\n\x1b[8mhidden\u2028\u202e\U0001f600 \u00a7\r\n"
    session = {"id": "hermes-s1", "cwd": "/home/ana/code/api"}
    answers = _hook(store, [
        b"not json\n", b"[1, 2]\n", _req(3, "nope"),
        _req(4, "call", name="memory_rm", args={}, session=session),
        _req(5, "call", name="memory_add", args={"text": "x", "source": "evil"},
             session=session),
        _req(6, "call", name="memory_add", args={"track": "user"}, session=session),
        _req(7, "call", name="memory_add", args={"text": hostile, "scope": "user-global"},
             session=session),
        _req(8, "tools"),
        _req(9, "call", name="memory_add", args={"text": "x", "track": "people",
                                                 "scope": "global"}, session=session),
        _req(10, "call", name="memory_replace", args={"match": "a", "text": "b",
                                                      "tags": ["ok", 7]}, session=session),
    ])
    assert [a["id"] for a in answers] == [None, None, 3, 4, 5, 6, 7, 8, 9, 10]
    # values that miss the schema: the sentences filemem mcp says (tests/test_mcp.py)
    for a, says in ((answers[8], '`track` must be one of "user", "agent" (got "people"); '
                                 '`scope` must be one of "user-global", "workspace" (got '
                                 '"global")'),
                    (answers[9], "item 1 of `tags` must be a string (got 7)")):
        assert a["result"]["error"]["code"] == "INVALID_INPUT"
        assert says in a["result"]["error"]["message"]
    assert all("error" in a for a in answers[:3])
    assert "unknown method 'nope'" in answers[2]["error"]["message"]
    for a, why in ((answers[3], "unknown tool 'memory_rm'"),
                   (answers[4], "`source` is not one of its arguments"),
                   (answers[5], "`text` is required (a string)")):
        assert a["result"]["ok"] is False and a["result"]["error"]["code"] == "INVALID_INPUT"
        assert why in a["result"]["error"]["message"]
    # the words and details filemem mcp uses for arguments that miss the schema
    assert answers[5]["result"]["error"]["message"].startswith(
        "invalid arguments for memory_add: `text` is required (a string); fix them and call "
        "memory_add again (its arguments: `text`, `track`, `scope`, `tags`)")
    assert answers[5]["result"]["error"]["details"] == {"tool": "memory_add", "arguments": [
        {"argument": "text", "expected": "a string", "missing": True}]}
    assert answers[4]["result"]["error"]["details"]["arguments"] == [
        {"argument": "source", "unknown": True}]
    staged = answers[6]["result"]["error"]
    assert staged["code"] == "WRITE_DENIED" and staged["details"]["outcome"] == "pending"
    assert "do not retry" in staged["hint"]
    with filemem.open_owner(store) as owner:
        (record,) = owner.pending()
    assert record["payload"]["text"] == hostile  # exactly what the model sent
    assert record["payload"]["source"] == "memory-tool"
    assert record["write"]["agent"]["session"] == {
        "id": "hermes-s1", "header": {"agentPreset": "hermes", "cwd": "/home/ana/code/api"}}
    tools = {t["name"]: t for t in answers[7]["result"]}
    assert list(tools) == ["memory_add", "memory_replace", "memory_remove",
                           "memory_consolidate", "memory_query", "memory_budgets"]
    for t in tools.values():
        params = t["parameters"]
        assert set(params["required"]) <= set(params["properties"])
        assert "source" not in params["properties"] and "agent" not in params["properties"]


def test_the_owners_policy_decides_as_everywhere(store: Path) -> None:
    """Under `auto` (the owner's filemem.yaml) a tool call writes; under `off` it is refused."""
    cfg = store / "filemem.yaml"
    for policy, ok in (("auto", True), ("off", False)):
        cfg.write_text(cfg.read_text().replace("writePolicy: ask", f"writePolicy: {policy}")
                       .replace("writePolicy: auto", f"writePolicy: {policy}"))
        subprocess.run(["git", "-C", str(store), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-qam", policy], check=True)
        (answer,) = _hook(store, [_req(1, "call", name="memory_add", args={
            "text": f"written under {policy}"}, session={"id": "h", "cwd": "/p"})])
        assert answer["result"]["ok"] is ok
    # refused by the policy, not by a person: the details and the hint say which setting
    error = answer["result"]["error"]
    assert error["details"] == {"outcome": "rejected", "policy": "off", "policyKey": None}
    assert "`writePolicy: off`" in error["hint"] and "nobody was asked" in error["hint"]
    assert "declined" not in error["hint"]
    with filemem.open_store(store) as p:
        texts = [e["text"] for e in p.list_entries()]
    assert "written under auto" in texts and "written under off" not in texts


# ---------------------------------------------------------------- inside the real Hermes

IN_HERMES = r"""
import json, os, sys
out = {}
from plugins.memory import discover_memory_providers, load_memory_provider
out["discovered"] = [list(d) for d in discover_memory_providers() if d[0] == "filemem"]
from hermes_cli.config import load_config
name = load_config()["memory"]["provider"]
from agent.memory_manager import MemoryManager
manager = MemoryManager()
provider = load_memory_provider(name)
out["class"] = type(provider).__name__
manager.add_provider(provider)
manager.initialize_all(session_id="hermes-sess-A", platform="cli", agent_context="primary")
out["tools"] = sorted(manager.get_all_tool_names())
out["prompt"] = manager.build_system_prompt()
out["prompt_again"] = manager.build_system_prompt()
out["add"] = json.loads(manager.handle_tool_call(
    "memory_add", {"text": "Deploys with make ship", "track": "agent", "scope": "workspace"}))
provider._proc.kill(); provider._proc.wait()  # filemem dies: the next call starts it again
out["query"] = json.loads(manager.handle_tool_call("memory_query", {"text": "fish"}))
from tools.memory_tool import MemoryStore, memory_tool
store = MemoryStore(); store.load_from_disk()
args = {"action": "add", "target": "memory", "content": "Repo uses uv, not pip"}
result = memory_tool(store=store, **args)
manager.notify_memory_tool_write(result, args)
out["builtin"] = json.loads(result)
manager.shutdown_all()
print(json.dumps(out))
"""

REPLACE_IN_HERMES = r"""
import json
from plugins.memory import load_memory_provider
from agent.memory_manager import MemoryManager
manager = MemoryManager()
manager.add_provider(load_memory_provider("filemem"))
manager.initialize_all(session_id="hermes-sess-B", platform="cli")
from tools.memory_tool import MemoryStore, memory_tool
store = MemoryStore(); store.load_from_disk()
args = {"action": "replace", "target": "memory", "old_text": "uses uv",
        "content": "Repo uses uv 0.9, not pip"}
result = memory_tool(store=store, **args)
manager.notify_memory_tool_write(result, args)
manager.shutdown_all()
print(result)
"""


def _in_hermes(code: str, home: Path, cwd: Path) -> dict[str, Any]:
    tools = hermes_agent()
    env = {**os.environ, "HERMES_HOME": str(home), "HOME": str(home.parent)}
    out = tools.run(code, env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_hermes_finds_loads_and_uses_the_plugin(home: Path, store: Path, tmp_path: Path
                                                ) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert cli(home, "connect", "hermes", store=store).returncode == 0
    with filemem.open_store(store) as p:
        entries = [(e["id"], e["version"], e["text"]) for e in p.list_entries()]
    got = _in_hermes(IN_HERMES, home, project)
    assert got["discovered"] and got["discovered"][0][2] is True  # found, available
    assert got["class"] == "FilememMemoryProvider"
    assert {"memory_add", "memory_query", "memory_replace"} <= set(got["tools"])
    # the system prompt block is the snapshot filemem recorded for Hermes' session
    with filemem.open_store(store) as p:
        rows = [r for r in p.audit_list(50) if r["action"] == "snapshot"]
        assert [(e["id"], e["version"], e["text"]) for e in p.list_entries()] == entries
    assert len(rows) == 1 and rows[0]["sessionId"] == "hermes-sess-A"
    assert got["prompt"] == rows[0]["text"] == got["prompt_again"]
    assert "- Prefers concise answers" in got["prompt"] and "- Uses fish as the shell" in \
        got["prompt"]
    # its first line names the write tools Hermes' model has (the plugin's)
    assert got["prompt"].splitlines()[0].endswith(
        "use the memory_add, memory_replace, memory_remove or memory_consolidate tool.]")
    assert set(WRITE_TOOL_NAMES) <= set(got["tools"])
    # a tool call reached filemem's gate: staged for the owner, not written
    assert got["add"]["ok"] is False
    assert got["add"]["error"]["details"]["outcome"] == "pending"
    assert [e["text"] for e in got["query"]["entries"]] == ["Uses fish as the shell"]
    assert got["builtin"]["success"] is True  # Hermes' own memory tool did its own write
    pending = cli(home, "pending", store=store)
    assert "Deploys with make ship" in pending.stdout
    assert "add agent/workspace [source:memory-tool]  (session hermes-sess-A)" in pending.stdout
    assert "add agent/user-global [source:hermes]  (session hermes-sess-A)" in pending.stdout
    assert "Repo uses uv, not pip" in pending.stdout
    with filemem.open_owner(store) as owner:
        records = {r["payload"]["text"]: r for r in owner.pending()}
        assert records["Deploys with make ship"]["write"]["agent"]["session"]["header"][
            "cwd"] == str(project)
        # the owner approves the mirrored write; Hermes then replaces that memory
        owner.approve(records["Repo uses uv, not pip"]["id"])
    with filemem.open_store(store) as p:
        assert "Repo uses uv, not pip" in [e["text"] for e in p.list_entries()]
    _in_hermes(REPLACE_IN_HERMES, home, project)
    with filemem.open_owner(store) as owner:
        (replace,) = [r for r in owner.pending() if r["action"] == "replace"]
        assert replace["payload"]["text"] == "from:\nRepo uses uv, not pip\n\nto:\n" \
                                             "Repo uses uv 0.9, not pip"
        owner.approve(replace["id"])
    with filemem.open_store(store) as p:
        texts = [e["text"] for e in p.list_entries()]
    assert "Repo uses uv 0.9, not pip" in texts and "Repo uses uv, not pip" not in texts
    # a Python that writes bytecode caches leaves one in the plugin: disconnect removes it too
    plugin = home / "plugins" / "filemem"
    subprocess.run([str(hermes_agent().python), "-m", "compileall", "-q", str(plugin)],
                   check=True)
    assert list((plugin / "__pycache__").glob("*.pyc"))
    assert cli(home, "disconnect", "hermes").returncode == 0
    assert not (home / "plugins").exists()


def test_a_whole_hermes_session(home: Path, store: Path, tmp_path: Path) -> None:
    """`hermes chat -q` against a stand-in for the model API on a loopback port: the model
    receives the audited snapshot in its system prompt, its memory_add waits as a pending
    approval, and Hermes' own memory tool's write is mirrored as one."""
    tools = hermes_agent()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"tool_calls": [["memory_add", {"text": "CI runs on Debian 13", "track": "agent",
                                        "scope": "workspace"}],
                        ["memory", {"action": "add", "target": "user",
                                    "content": "Prefers tea over coffee"}]]},
        {"content": "Noted."}]))
    log = tmp_path / "requests.jsonl"
    fake = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai.py"),
                             str(script), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        port = int(fake.stdout.readline())
        (home / "config.yaml").write_text(CONFIG.replace(
            "model: ''\n", f"model:\n  provider: custom\n  base_url: http://127.0.0.1:{port}/v1"
                           "\n  default: fake-model\n"))
        assert cli(home, "connect", "hermes", store=store).returncode == 0
        project = tmp_path / "project"
        project.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(HERMES_HOME=str(home), HOME=str(tmp_path), OPENAI_API_KEY="sk-test")
        out = subprocess.run([str(tools.hermes), "chat", "-q", "remember this", "-Q",
                              "--yolo"], env=env, cwd=project, capture_output=True,
                             text=True, timeout=240, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "Noted." in out.stdout
    finally:
        fake.kill()
        fake.wait()
    turns = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    turns = [b for b in turns if b.get("tools")]
    assert len(turns) == 2
    with filemem.open_store(store) as p:
        (row,) = [r for r in p.audit_list(50) if r["action"] == "snapshot"]
    for body in turns:  # the same frozen snapshot in both requests of the session
        system = body["messages"][0]
        assert system["role"] == "system"
        assert row["text"] in system["content"]
        # the tools the snapshot's first line names are the model's
        names = {t["function"]["name"] for t in body["tools"]}
        assert set(WRITE_TOOL_NAMES) <= names
        assert all(n in row["text"].splitlines()[0] for n in WRITE_TOOL_NAMES)
        assert "- Prefers concise answers" in row["text"]
    assert {"memory_add", "memory_consolidate"} <= {t["function"]["name"]
                                                    for t in turns[0]["tools"]}
    results = [m for m in turns[1]["messages"] if m["role"] == "tool"]
    added = json.loads(results[0]["content"])
    assert added["ok"] is False and added["error"]["details"]["outcome"] == "pending"
    pending = cli(home, "pending", store=store).stdout
    assert "CI runs on Debian 13" in pending and "Prefers tea over coffee" in pending
    assert f"(session {row['sessionId']})" in pending
    assert (home / "memories" / "USER.md").read_text() == "Prefers tea over coffee"
    with filemem.open_store(store) as p:
        assert {e["text"] for e in p.list_entries()} == {"Prefers concise answers",
                                                          "Uses fish as the shell"}
    assert cli(home, "disconnect", "hermes").returncode == 0
    assert not (home / "plugins").exists()
    assert _yaml((home / "config.yaml").read_text())["memory"]["provider"] == ""
