"""`filemem connect` / `disconnect`, SIGKILLed at every step (tests/stopping.py): each file
is as it was or fully connected, and the next run gets to the right state. With the real
Claude Code CLI (its `claude mcp list` is the judge) and the real Hermes Agent layout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.nodejs import node_tools
from tests.stopping import every_stop
from tests.test_connect_claude import FILEMEM, Box, _box, ok

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP and SIGKILL")


@pytest.fixture
def box(tmp_path: Path) -> Box:
    b = _box(tmp_path, node_tools().bin("claude"))
    ok(b.run_claude("mcp", "list"))  # Claude Code's own first-run bookkeeping
    return b


def servers(box: Box) -> Any:
    return json.loads(box.state.read_text()).get("mcpServers")


def listed(box: Box) -> str:
    out = ok(box.run_claude("mcp", "list"))
    return next((ln for ln in out.splitlines() if ln.startswith("filemem:")), "")


def test_a_reregistration_killed_anywhere_leaves_the_old_server_or_the_new(
        box: Box, tmp_path: Path) -> None:
    box.settings.parent.mkdir(parents=True, exist_ok=True)
    box.settings.write_bytes(b'{\n  "model": "opus"\n}')
    ok(box.filemem("connect", "claude-code", "--no-import"))
    old_state, old_settings = box.state.read_bytes(), box.settings.read_bytes()
    old = servers(box)["filemem"]
    other = tmp_path / "other store"
    argv = [str(FILEMEM), "connect", "claude-code", "--no-import", "--store", str(other)]
    points = []
    for run in every_stop(argv, env=box.env(), cwd=box.project):
        if not run.killed:
            assert run.returncode == 0, run.stderr
            break
        points.append(run.point)
        entry = servers(box)["filemem"]
        assert entry == old or entry["args"] == ["mcp", "--agent", "claude-code", "--store",
                                                 str(other)]
        assert box.state.read_bytes() == old_state or entry != old  # untouched, or changed
        assert not Path(str(box.state) + ".lock").exists()  # never killed under the lock
        line = listed(box)
        assert "Connected" in line, line  # registered all along: never removed then added
        # the next connect finishes the job
        ok(box.filemem("connect", "claude-code", "--no-import", "--store", str(other)))
        assert servers(box)["filemem"]["args"][-1] == str(other)
        assert str(other) in json.loads(box.settings.read_text())["hooks"]["SessionStart"][
            0]["hooks"][0]["command"]
        box.state.write_bytes(old_state)  # back to the old connection for the next kill
        box.settings.write_bytes(old_settings)
    assert [p.split(": ", 1)[1].split(" ")[0] for p in points] == ["replace", "write"]
    assert "Connected" in listed(box)


def test_connect_and_disconnect_killed_anywhere_then_finished(box: Box) -> None:
    box.settings.parent.mkdir(parents=True, exist_ok=True)
    box.settings.write_bytes(b'{\n  "model": "opus"\n}')
    before_settings = box.settings.read_bytes()
    assert servers(box) is None  # a fresh Claude Code has no "mcpServers" at all
    connect = [str(FILEMEM), "connect", "claude-code", "--no-import"]
    disconnect = [str(FILEMEM), "disconnect", "claude-code"]
    record = box.home / ".claude" / "filemem-connect.json"
    killed = 0
    for run in every_stop(connect, env=box.env(), cwd=box.project):
        if not run.killed:
            break
        killed += 1
        got = servers(box)
        assert got is None or set(got) == {"filemem"}
        assert box.settings.read_bytes() == before_settings  # the hook is the last step
        ok(box.filemem("connect", "claude-code", "--no-import"))  # finishes
        assert "Connected" in listed(box) and "session-start" in box.settings.read_text()
        ok(box.filemem("disconnect", "claude-code"))
        assert servers(box) is None and not record.exists()
        assert box.settings.read_bytes() == before_settings
    assert killed == 3  # the record, `claude mcp add-json`, the hook
    connected = box.settings.read_bytes()
    assert servers(box) is not None and record.exists()
    state = box.state.read_bytes()
    killed = 0
    for run in every_stop(disconnect, env=box.env(), cwd=box.project):
        if not run.killed:
            assert run.returncode == 0, run.stderr
            break
        killed += 1
        got = servers(box)
        assert got is None or set(got) == {"filemem"}  # never an empty "mcpServers"
        assert box.settings.read_bytes() in (connected, before_settings)
        ok(box.filemem("disconnect", "claude-code"))  # finishes
        assert servers(box) is None and not record.exists()
        assert box.settings.read_bytes() == before_settings and "filemem" not in listed(box)
        box.state.write_bytes(state)  # connected again, as it was
        box.settings.write_bytes(connected)
        record.write_text('{"by": "filemem connect claude-code", "madeMcpServers": true, '
                          '"madeServerFile": false}')
    assert killed == 3  # the hook, the server, the record
    assert servers(box) is None and box.settings.read_bytes() == before_settings
    assert not record.exists()


def test_disconnect_keeps_an_mcp_servers_that_was_there_before(box: Box) -> None:
    state = json.loads(box.state.read_text())
    state["mcpServers"] = {}
    box.state.write_text(json.dumps(state, indent=2))
    ok(box.filemem("connect", "claude-code", "--no-import"))
    assert set(servers(box)) == {"filemem"}
    ok(box.filemem("disconnect", "claude-code"))
    assert servers(box) == {}  # the person's (empty) key stays
    ok(box.filemem("connect", "claude-code", "--no-import", "--scope", "project"))
    ok(box.filemem("disconnect", "claude-code", "--scope", "project"))
    assert sorted(p.name for p in box.project.iterdir()) == []
    mcp = box.project / ".mcp.json"
    mcp.write_bytes(b'{\n  "mcpServers": {}\n}')  # as Claude Code writes it
    ok(box.filemem("connect", "claude-code", "--no-import", "--scope", "project"))
    ok(box.filemem("disconnect", "claude-code", "--scope", "project"))
    assert mcp.read_bytes() == b'{\n  "mcpServers": {}\n}'
