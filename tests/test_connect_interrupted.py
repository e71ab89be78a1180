"""`filemem connect` / `disconnect`, SIGKILLed at every step (tests/stopping.py): each file
is as it was or fully connected, and the next run gets to the right state. With the real
Claude Code CLI (its `claude mcp list` is the judge) and the real Hermes Agent layout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.nodejs import node_tools
from tests.stopping import every_stop, run_killed
from tests.test_connect_claude import FILEMEM, Box, _box, ok
from tests.test_connect_hermes import CONFIG
from tests.test_connect_hermes import files as hfiles

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
        if got:
            assert "Claude Code (scope user): partly connected (MCP server is filemem, " \
                   "SessionStart hook absent); `filemem connect claude-code` finishes it" \
                   in ok(box.filemem("connections"))
        ok(box.filemem("connect", "claude-code", "--no-import"))  # finishes
        assert "Connected" in listed(box) and "session-start" in box.settings.read_text()
        assert "Claude Code (scope user): connected" in ok(box.filemem("connections"))
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


# ---------------------------------------------------------------- Hermes

WORK = ".filemem-connect"
PLUGIN_DIR = "plugins/filemem"


def hermes_files(home: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``home`` but the work folder."""
    return {k: v for k, v in hfiles(home).items() if not k.startswith(WORK)}


def hermes_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FILEMEM_", "HERMES_"))}
    return {**env, "HERMES_HOME": str(home), "HOME": str(home.parent)}


def hermes_run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FILEMEM), *args], env=hermes_env(home), cwd=home.parent,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def restore(home: Path, state: dict[str, bytes | None]) -> None:
    shutil.rmtree(home)
    home.mkdir()
    for rel, data in sorted(state.items()):
        path = home / rel
        if data is None:
            path.mkdir(mode=0o700, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def folder(state: dict[str, bytes | None]) -> dict[str, bytes | None]:
    return {k: v for k, v in state.items() if k.startswith("plugins")}


def as_hermes_sees_it(state: dict[str, bytes | None], off: dict[str, bytes | None],
                      on: dict[str, bytes | None]) -> str:
    """'off' or 'on': config.yaml is one of the two states' and the rest is too; with
    config.yaml on, the plugin folder is the connected one; off, it may be either, whole
    (Hermes loads a memory provider only when memory.provider names it)."""
    rest = {k: v for k, v in state.items() if not k.startswith("plugins")}
    assert rest in ({k: v for k, v in s.items() if not k.startswith("plugins")}
                    for s in (off, on)), state
    if state["config.yaml"] == on["config.yaml"]:
        assert folder(state) == folder(on)
        return "on"
    assert folder(state) in (folder(off), folder(on))
    return "off"


@pytest.fixture
def hermes_home(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG, encoding="utf-8")
    store = tmp_path / "store"
    ok(subprocess.run([str(FILEMEM), "--store", str(store), "init"], capture_output=True,
                      text=True, env=hermes_env(home), timeout=60))
    return home, store


def _finished_both_ways(home: Path, tmp_path: Path, before: dict[str, bytes | None],
                        connected: dict[str, bytes | None], out_lines: list[str]) -> None:
    """From the state a kill left: connect gets to `connected`, disconnect to `before`."""
    other = tmp_path / "other-home"
    if other.exists():
        shutil.rmtree(other)
    shutil.copytree(home, other, symlinks=True)
    con = hermes_run(home, "connect", "hermes", "--store", str(home.parent / "store"))
    assert con.returncode == 0, con.stderr
    assert hermes_files(home) == connected and not (home / WORK).exists()
    dis = hermes_run(other, "disconnect", "hermes")
    assert dis.returncode == 0, dis.stderr
    assert hermes_files(other) == before and not (other / WORK).exists()
    out_lines.extend(ln for ln in (con.stdout + dis.stdout).splitlines()
                     if "interrupted" in ln)


def _killed_at_every_stop(cmd: list[str], home: Path, tmp_path: Path,
                          before: dict[str, bytes | None], connected: dict[str, bytes | None],
                          said: list[str], reset: dict[str, bytes | None]
                          ) -> list[tuple[str, str]]:
    """Run ``cmd`` killed at each of its stop points in turn (until a run is not killed):
    after each kill, what Hermes would see, then the next command finishing or rolling
    back both ways, then ``home`` put back to ``reset``. The (stop point, seen) pairs."""
    seen = []
    for run in every_stop(cmd, env=hermes_env(home), cwd=tmp_path):
        if not run.killed:
            assert run.returncode == 0, run.stderr
            break
        seen.append((run.point, as_hermes_sees_it(hermes_files(home), before, connected)))
        _finished_both_ways(home, tmp_path, before, connected, said)
        restore(home, reset)
    return seen


def test_hermes_connect_and_disconnect_killed_anywhere(hermes_home: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    home, store = hermes_home
    before = hermes_files(home)
    ok(hermes_run(home, "connect", "hermes", "--store", str(store)))
    connected = hermes_files(home)
    assert PLUGIN_DIR + "/__init__.py" in connected and not (home / WORK).exists()
    restore(home, before)
    said: list[str] = []
    connect = [str(FILEMEM), "connect", "hermes", "--store", str(store)]
    seen = _killed_at_every_stop(connect, home, tmp_path, before, connected, said, before)
    assert [w for _, w in seen] == ["off", "off", "off", "off", "on"], seen
    assert "switch" in seen[3][0] and "end" in seen[4][0]
    assert any("had not switched config.yaml yet: rolled it back" in s for s in said)
    assert any("had already switched config.yaml: finished it" in s for s in said)
    restore(home, connected)
    seen = _killed_at_every_stop([str(FILEMEM), "disconnect", "hermes"], home, tmp_path,
                                 before, connected, said, connected)
    assert [w for _, w in seen] == ["on", "on", "off", "off"], seen
    assert hermes_files(home) == before


def test_hermes_reconnect_killed_anywhere_keeps_a_whole_plugin(
        hermes_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, store = hermes_home
    ok(hermes_run(home, "connect", "hermes", "--store", str(store)))
    old = hermes_files(home)
    ok(hermes_run(home, "connect", "hermes", "--store", str(store), "--agent", "reviewer"))
    new = hermes_files(home)
    assert old != new and old["config.yaml"] == new["config.yaml"]
    restore(home, old)
    argv = [str(FILEMEM), "connect", "hermes", "--store", str(store), "--agent", "reviewer"]
    kills = 0
    for run in every_stop(argv, env=hermes_env(home), cwd=tmp_path):
        if not run.killed:
            break
        kills += 1
        assert hermes_files(home) in (old, new), run.point  # the old folder or the new, whole
        again = hermes_run(home, *argv[1:])
        assert again.returncode == 0 and hermes_files(home) == new, again.stderr
        restore(home, old)
    assert kills == 4  # begin, stage, swap, end


def test_connections_shows_what_is_connected_and_what_was_interrupted(
        hermes_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, store = hermes_home
    before = hermes_files(home)
    argv = [str(FILEMEM), "connect", "hermes", "--store", str(store)]
    run = run_killed(argv, 4, env=hermes_env(home), cwd=tmp_path)  # just before the switch
    assert run.killed and "switch" in run.point
    shown = hermes_run(home, "connections")
    assert shown.returncode == 0, shown.stderr
    assert "Hermes Agent (home" in shown.stdout and ": not connected (filemem's plugin " \
        "folder is there" in shown.stdout
    assert "A `filemem connect hermes` was interrupted; the next `filemem connect hermes` or " \
           "`filemem disconnect hermes` rolls it back first." in shown.stdout
    assert hermes_files(home) != before and (home / WORK).exists()  # it only reads
    gone = ok(hermes_run(home, "disconnect", "hermes"))
    assert gone.splitlines()[0] == ("An interrupted `filemem connect hermes` had not switched "
                                    "config.yaml yet: rolled it back, every file is as it "
                                    "was before it.")
    assert hermes_files(home) == before
    ok(hermes_run(home, "connect", "hermes", "--store", str(store)))
    found = json.loads(ok(hermes_run(home, "connections", "--json")))
    assert found["hermes"]["connected"] is True and found["hermes"]["interrupted"] is None
    assert found["hermes"]["store"] == str(store)
    assert [c["scope"] for c in found["claudeCode"]] == ["user", "project"]
    assert not any(c["connected"] for c in found["claudeCode"])
    assert found["hermes"]["pythonMissing"] is False
    # the Python the plugin runs filemem with, gone (its venv removed): connected, not working
    settings = home / "plugins" / "filemem" / "filemem.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    settings.write_text(json.dumps({**data, "python": str(tmp_path / "gone" / "python")}),
                        encoding="utf-8")
    shown = ok(hermes_run(home, "connections"))
    assert "connected, but not working: the Python it runs filemem with" in shown
    assert "`filemem connect hermes` again" in shown
    assert json.loads(ok(hermes_run(home, "connections", "--json")))["hermes"]["pythonMissing"]


# filemem, on a system without renameat2(RENAME_EXCHANGE): two renames and the journal
NO_EXCHANGE = """
import sys
import filemem.files.exchange as exchange
exchange.exchange = lambda a, b: False
from filemem.cli import main
sys.argv[0] = "filemem"
main()
"""


def test_without_an_atomic_swap_a_kill_between_the_renames_is_finished(
        hermes_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, store = hermes_home

    def run(*args: str) -> str:  # every run through the same Python, as filemem.json says
        return ok(subprocess.run([sys.executable, "-c", NO_EXCHANGE, *args],
                                 env=hermes_env(home), cwd=tmp_path, capture_output=True,
                                 text=True, timeout=120, stdin=subprocess.DEVNULL))

    run("connect", "hermes", "--store", str(store))
    old = hermes_files(home)
    args = ["connect", "hermes", "--store", str(store), "--agent", "reviewer"]
    run(*args)
    new = hermes_files(home)
    restore(home, old)
    argv = [sys.executable, "-c", NO_EXCHANGE, *args]
    points = []
    for killed in every_stop(argv, env=hermes_env(home), cwd=tmp_path):
        if not killed.killed:
            assert killed.returncode == 0, killed.stderr
            break
        points.append(killed.point)
        state = hermes_files(home)
        gap = "rename" in killed.point  # the old folder out, the new one not yet in
        if gap:
            assert PLUGIN_DIR not in state and (home / WORK / "plugin").is_dir()
        else:
            assert state in (old, new), killed.point
        if len(points) % 2:  # disconnect finishes (or rolls back), then connect
            again = run("disconnect", "hermes")
            run(*args)
        else:
            again = run(*args)
        if gap:
            assert "had already switched config.yaml: finished it" in again
        assert hermes_files(home) == new
        restore(home, old)
    assert len(points) == 5 and "rename" in points[3]
    assert hermes_files(home) == new


def test_a_failing_claude_leaves_no_record_behind(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'API Error: something broke' >&2\nexit 3\n")
    fake.chmod(0o755)
    b = _box(tmp_path, fake)
    out = b.filemem("connect", "claude-code", "--no-import")
    assert out.returncode == 1 and "AGENT_CLI_FAILED" in out.stderr
    assert "something broke" in out.stderr
    assert not (b.home / ".claude" / "filemem-connect.json").exists()
    assert not b.state.exists() and not b.settings.exists()
