"""`filemem connect claude-code` / `disconnect claude-code` and the SessionStart hook, with
the real Claude Code CLI (pinned in tests/node) under a temporary HOME.

Claude Code's own commands are the judge: `claude mcp list` must show the server connected,
and a whole `claude -p` session (against a stand-in for the model API on a loopback port,
tests/fake_anthropic.py) must hand the model the store's snapshot and filemem's tools. The
hook is also run exactly as Claude Code runs it: its settings' command string through
`sh -c`, with the stdin JSON Claude Code sends (captured from this version of Claude Code).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.fake_anthropic import fake_api, messages, texts
from tests.nodejs import node_tools

FILEMEM = Path(sys.executable).with_name("filemem")  # the console script a person runs
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Claude Code's hooks run sh")


@dataclass
class Box:
    """A person's machine in miniature: a HOME, a project folder, and an environment with
    (or without) Claude Code's `claude` on PATH."""

    home: Path
    project: Path
    claude: Path | None

    def env(self, *, with_claude: bool = True, **extra: str) -> dict[str, str]:
        drop = ("FILEMEM_", "CLAUDE", "ANTHROPIC_", "XDG_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        path = [str(FILEMEM.parent), SYSTEM_PATH]
        if with_claude and self.claude is not None:
            path.insert(0, str(self.claude.parent))
        env.update(HOME=str(self.home), PATH=os.pathsep.join(path), DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **extra)
        return env

    def filemem(self, *args: str, with_claude: bool = True, input: str | None = None,
                cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(FILEMEM), *args], cwd=cwd or self.project, text=True,
                              capture_output=True, env=self.env(with_claude=with_claude,
                                                                **extra),
                              input=input, stdin=None if input is not None else
                              subprocess.DEVNULL, timeout=180)

    def run_claude(self, *args: str, cwd: Path | None = None,
                   **extra: str) -> subprocess.CompletedProcess[str]:
        assert self.claude is not None
        # Claude Code waits for the MCP server before its first model request: by default it
        # starts without a server still connecting (its tools come later), a race under load
        wait = {"MCP_CONNECTION_NONBLOCKING": "false", "MCP_TIMEOUT": "120000"}
        return subprocess.run([str(self.claude), *args], cwd=cwd or self.project, text=True,
                              capture_output=True, env=self.env(**{**wait, **extra}),
                              timeout=180, stdin=subprocess.DEVNULL)

    @property
    def settings(self) -> Path:
        return self.home / ".claude" / "settings.json"

    @property
    def state(self) -> Path:
        return self.home / ".claude.json"

    @property
    def store(self) -> Path:
        out = self.filemem("path")
        assert out.returncode == 0, out.stderr
        return Path(out.stdout.strip())

    def rows(self, action: str = "snapshot") -> list[dict[str, Any]]:
        with filemem.open_store(self.store) as p:
            return [r for r in p.audit_list(1000) if r["action"] == action]


def _box(tmp_path: Path, claude: Path | None) -> Box:
    home, project = tmp_path / "home", tmp_path / "work" / "api"
    home.mkdir()
    project.mkdir(parents=True)
    assert FILEMEM.is_file(), f"{FILEMEM} missing: pip install -e '.[test]'"
    return Box(home, project, claude)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    """A machine with Claude Code installed (the pinned npm package)."""
    return _box(tmp_path, node_tools().bin("claude"))


def no_system_claude() -> None:
    if shutil.which("claude", path=SYSTEM_PATH):
        pytest.skip("a system-wide `claude` is installed: it cannot be taken off PATH")


@pytest.fixture
def bare(tmp_path: Path) -> Box:
    """A machine without Claude Code's `claude` command."""
    no_system_claude()
    return _box(tmp_path, None)


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def hook_command(settings: Path) -> str:
    """The command of the one SessionStart hook handler in ``settings``."""
    groups = json.loads(settings.read_text())["hooks"]["SessionStart"]
    handlers = [h for g in groups for h in g["hooks"] if "filemem" in h["command"]]
    assert len(handlers) == 1, groups
    assert handlers[0]["type"] == "command"
    return str(handlers[0]["command"])


def session_start_input(box: Box, session_id: str, source: str = "startup",
                        cwd: Path | None = None) -> str:
    """What Claude Code 2.1.332 writes to a SessionStart hook's stdin (captured from it)."""
    where = cwd or box.project
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(where))
    return json.dumps({
        "session_id": session_id,
        "transcript_path": str(box.home / ".claude" / "projects" / slug / f"{session_id}.jsonl"),
        "cwd": str(where), "hook_event_name": "SessionStart", "source": source})


def run_hook(box: Box, stdin: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
    """The hook as Claude Code runs it: the command string through `sh -c`, in the
    project folder, with Claude Code's environment and the input on stdin."""
    return subprocess.run(["sh", "-c", hook_command(box.settings)], cwd=box.project,
                          input=stdin.encode(), capture_output=True, timeout=60,
                          env=box.env(CLAUDE_PROJECT_DIR=str(box.project), **extra))


def add(box: Box, text: str, *args: str) -> None:
    ok(box.filemem("init"))  # (nothing changes when the store is there)
    ok(box.filemem("add", "--yes", *args, "--", text))


# ---------------------------------------------------------------- with Claude Code's CLI


def test_connect_registers_a_server_claude_code_connects_to(box: Box) -> None:
    out = ok(box.filemem("connect", "claude-code"))
    assert 'MCP server "filemem" in ~/.claude.json: added (by `claude mcp add-json --scope ' \
           'user`)' in out
    assert "SessionStart hook in ~/.claude/settings.json: added" in out
    listed = ok(box.run_claude("mcp", "list"))
    line = next(ln for ln in listed.splitlines() if ln.startswith("filemem:"))
    assert f"{FILEMEM} mcp --agent claude-code" in line and "Connected" in line, listed
    assert hook_command(box.settings) == f"{FILEMEM} hook claude-code session-start --agent " \
                                         "claude-code"
    # again: nothing changes, byte for byte
    before = (box.settings.read_bytes(), box.state.read_bytes())
    again = ok(box.filemem("connect", "claude-code"))
    assert "already connected" in again and "nothing changed" in again
    assert (box.settings.read_bytes(), box.state.read_bytes()) == before


def test_a_real_claude_session_starts_with_the_snapshot_and_filemem_tools(box: Box) -> None:
    add(box, "Prefers concise answers, in English", "--track", "user", "--scope",
        "user-global")
    add(box, "Tests run with `make test`; never mock the database", "--track", "agent",
        "--scope", "workspace", "--agent", "claude-code", "--workspace", str(box.project))
    ok(box.filemem("connect", "claude-code"))
    with fake_api() as api:
        host, port = api.server_address[:2]
        out = box.run_claude("-p", "hello", "--output-format", "json",
                             ANTHROPIC_BASE_URL=f"http://{host!s}:{port}",
                             ANTHROPIC_API_KEY="sk-test-not-a-key")
        bodies = messages(api)
    assert out.returncode == 0, out.stdout + out.stderr
    session_id = json.loads(out.stdout)["session_id"]
    rows = [r for r in box.rows() if r["sessionId"] == session_id]
    assert len(rows) == 1, box.rows()  # recorded with Claude Code's own session id
    snapshot = rows[0]["text"]
    assert "- Prefers concise answers, in English" in snapshot
    assert "- Tests run with `make test`; never mock the database" in snapshot
    given = "\n".join(t for body in bodies[:1] for t in texts(body))
    # what the model is given is the recorded text, byte for byte, as hook context
    assert f"SessionStart hook additional context: {snapshot}\n" in given
    assert "mcp__filemem__memory_add" in given and "mcp__filemem__memory_query" in given


def test_project_scope_writes_the_project_files(box: Box) -> None:
    out = ok(box.filemem("connect", "claude-code", "--scope", "project", "--no-import"))
    assert "approve the .mcp.json server" in out
    mcp = json.loads((box.project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["filemem"]["args"] == ["mcp", "--agent", "claude-code"]
    settings = box.project / ".claude" / "settings.json"
    assert "hook claude-code session-start" in settings.read_text()
    listed = ok(box.run_claude("mcp", "list"))
    assert "filemem:" in listed and "Pending approval" in listed  # Claude Code's own gate
    assert not box.settings.exists()  # the user's files are not touched
    gone = ok(box.filemem("disconnect", "claude-code", "--scope", "project"))
    assert "removed" in gone
    assert sorted(p.name for p in box.project.iterdir()) == []  # nothing left behind


def test_disconnect_removes_exactly_what_connect_added(box: Box) -> None:
    theirs = {"$schema": "https://json.schemastore.org/claude-code-settings.json",
              "permissions": {"allow": ["Bash(make test)"]}, "model": "claude-sonnet-5",
              "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [
                  {"type": "command", "command": "echo 'hello from my hook'"}]}],
                  "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
              "env": {"GREETING": "héllo 🚀"}}
    box.settings.parent.mkdir(parents=True)
    original = json.dumps(theirs, indent=2, ensure_ascii=False).encode()  # as Claude writes
    box.settings.write_bytes(original)
    ok(box.run_claude("mcp", "add", "--scope", "user", "other", "--", "/bin/true"))
    ok(box.filemem("connect", "claude-code", "--agent", "coder"))
    connected = json.loads(box.settings.read_text())
    assert list(connected) == list(theirs)  # key order kept
    assert connected["hooks"]["SessionStart"][0] == theirs["hooks"]["SessionStart"][0]
    assert connected["hooks"]["Stop"] == theirs["hooks"]["Stop"]
    assert len(connected["hooks"]["SessionStart"]) == 2
    out = ok(box.filemem("disconnect", "claude-code"))
    assert "SessionStart hook in ~/.claude/settings.json: removed" in out
    assert box.settings.read_bytes() == original
    listed = ok(box.run_claude("mcp", "list"))
    assert "other:" in listed and "filemem:" not in listed
    again = ok(box.filemem("disconnect", "claude-code"))
    assert "was not connected" in again and box.settings.read_bytes() == original


def test_reconnecting_with_another_agent_replaces_ours_in_place(box: Box) -> None:
    ok(box.filemem("connect", "claude-code"))
    ok(box.filemem("connect", "claude-code", "--agent", "reviewer"))
    assert hook_command(box.settings).endswith("--agent reviewer")  # one handler, not two
    state = json.loads(box.state.read_text())
    assert state["mcpServers"]["filemem"]["args"] == ["mcp", "--agent", "reviewer"]


# ---------------------------------------------------------------- the hook, as Claude Code runs it


def test_the_hook_gives_claude_code_the_recorded_snapshot_byte_for_byte(box: Box) -> None:
    hostile = 'Quotes " and \\ backslash, é, 名前, 🚀,\ttab\nsecond line\u2028and \x1b[31m'
    add(box, hostile, "--track", "user", "--scope", "user-global")
    ok(box.filemem("connect", "claude-code", "--no-import"))
    out = run_hook(box, session_start_input(box, "0a1b2c3d-4e5f-6789-abcd-ef0123456789"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.isascii()  # JSON escapes: no raw control character on the way
    answer = json.loads(out.stdout)
    assert list(answer) == ["hookSpecificOutput"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    rows = box.rows()
    assert len(rows) == 1 and rows[0]["sessionId"] == "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
    assert rows[0]["text"].encode() == context.encode()
    assert f"- {hostile}" in context


def test_a_store_path_with_spaces_and_quotes_reaches_both_commands(box: Box) -> None:
    store = box.home / "my memory's \"store\" $HOME"
    ok(box.filemem("init", str(store)))
    ok(box.filemem("add", "--yes", "--store", str(store), "--scope", "user-global", "--",
                   "Lives in an odd folder"))
    ok(box.filemem("connect", "claude-code", "--store", str(store), "--no-import"))
    out = run_hook(box, session_start_input(box, "odd-1"))
    assert out.returncode == 0, out.stderr
    assert b"Lives in an odd folder" in out.stdout
    with filemem.open_store(store) as p:
        assert [r["sessionId"] for r in p.audit_list(10) if r["action"] == "snapshot"] == \
            ["odd-1"]
    listed = ok(box.run_claude("mcp", "list"))
    assert "Connected" in listed and "--store" in listed


def test_the_readmes_hook_output_is_what_the_hook_prints(box: Box) -> None:
    """README's example of the hook's output, and the `filemem snapshot --tools` command it
    gives for the same text, for a store holding the example's one memory."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use filemem with Claude Code", 1)[1]
    shown = section.split("and the hook prints\n\n```json\n", 1)[1].split("\n```", 1)[0]
    command = re.search(r"`(filemem\s+snapshot --agent claude-code --tools \S+)`", section)
    assert command is not None
    add(box, "Prefers concise answers, code first", "--scope", "user-global")
    out = subprocess.run([str(FILEMEM), "hook", "claude-code", "session-start"],
                         cwd=box.project, input=session_start_input(box, "s1"),
                         capture_output=True, text=True, env=box.env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown + "\n"
    text = json.loads(shown)["hookSpecificOutput"]["additionalContext"]
    assert ok(box.filemem(*command.group(1).split()[1:])) == text + "\n"


def test_a_snapshot_too_long_for_claude_codes_prompt_is_sent_whole_and_flagged(
        box: Box) -> None:
    for track, scope, size in (("user", "user-global", 1900), ("user", "workspace", 1900),
                               ("agent", "user-global", 3900), ("agent", "workspace", 3900)):
        add(box, f"{track} {scope} " + "é" * size, "--track", track, "--scope", scope,
            "--workspace", str(box.project))
    ok(box.filemem("connect", "claude-code", "--no-import"))
    out = json.loads(run_hook(box, session_start_input(box, "long-1")).stdout)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert len(context) > 11_600 and context == box.rows()[0]["text"]  # never cut
    assert f"snapshot is {len(context):,} characters" in out["systemMessage"]
    small = box.filemem("remove", "--yes", "--track", "agent", "--scope", "user-global",
                        "agent user-global")
    ok(small)
    assert "systemMessage" not in json.loads(
        run_hook(box, session_start_input(box, "long-2")).stdout)


def test_a_resumed_or_compacted_session_keeps_its_frozen_snapshot(box: Box) -> None:
    add(box, "Uses fish as the shell", "--scope", "user-global")
    ok(box.filemem("connect", "claude-code", "--no-import"))
    first = run_hook(box, session_start_input(box, "sess-1"))
    add(box, "Works on the api repo", "--scope", "user-global")  # during the session
    for source in ("compact", "resume"):
        again = run_hook(box, session_start_input(box, "sess-1", source))
        assert again.returncode == 0 and again.stdout == first.stdout  # frozen
    assert [r["sessionId"] for r in box.rows()] == ["sess-1"]  # one row for the session
    cleared = run_hook(box, session_start_input(box, "sess-2", "clear"))  # a new session
    assert b"Works on the api repo" in cleared.stdout
    assert [r["sessionId"] for r in box.rows()] == ["sess-2", "sess-1"]


def test_the_hook_uses_the_project_claude_code_reports_and_the_agent(box: Box) -> None:
    other = box.project.parent / "web"
    other.mkdir()
    add(box, "api: deploy with make ship", "--scope", "workspace", "--agent", "claude-code",
        "--workspace", str(box.project))
    add(box, "web: the reviewer's note", "--scope", "workspace", "--agent", "reviewer",
        "--workspace", str(other))
    ok(box.filemem("connect", "claude-code", "--no-import"))
    here = json.loads(run_hook(box, session_start_input(box, "s-api")).stdout)
    assert "make ship" in here["hookSpecificOutput"]["additionalContext"]
    elsewhere = run_hook(box, session_start_input(box, "s-web", cwd=other))
    assert elsewhere.returncode == 0 and elsewhere.stdout == b""  # nothing for claude-code
    assert box.rows()[0]["text"] == ""  # the empty snapshot is recorded too


@pytest.mark.parametrize("stdin,message", [
    ("not json", "stdin is not JSON"),
    ('["a list"]', "not a JSON object"),
    ('{"hook_event_name": "Stop", "session_id": "s"}', "not SessionStart"),
    ('{"hook_event_name": "SessionStart", "cwd": "/tmp"}', "no session_id"),
    ('{"session_id": "s", "cwd": "relative/path"}', "not an absolute path"),
])
def test_the_hook_refuses_input_that_is_not_claude_codes(box: Box, stdin: str,
                                                        message: str) -> None:
    ok(box.filemem("connect", "claude-code", "--no-import"))
    out = run_hook(box, stdin)
    assert out.returncode == 1 and out.stdout == b""  # a non-blocking error for Claude Code
    assert message in out.stderr.decode() and "INVALID_INPUT" in out.stderr.decode()
    assert box.rows() == []


def test_the_hook_without_a_store_says_so(box: Box) -> None:
    ok(box.filemem("connect", "claude-code", "--no-import"))
    shutil.rmtree(box.store)
    out = run_hook(box, session_start_input(box, "s1"))
    assert out.returncode == 4 and b"NO_STORE" in out.stderr and out.stdout == b""


# ---------------------------------------------------------------- without Claude Code's CLI


def test_without_claude_the_files_are_written_as_claude_code_would(box: Box) -> None:
    no_system_claude()
    out = ok(box.filemem("connect", "claude-code", with_claude=False))
    assert "`claude` command is not on PATH" in out and "did not exist either" in out
    assert json.loads(box.state.read_text()) == {"mcpServers": {"filemem": {
        "type": "stdio", "command": str(FILEMEM), "args": ["mcp", "--agent", "claude-code"],
        "env": {}}}}
    listed = ok(box.run_claude("mcp", "list"))  # and Claude Code reads them
    assert "filemem:" in listed and "Connected" in listed


def test_without_claude_disconnect_restores_every_file_byte_for_byte(bare: Box) -> None:
    for scope, server_file, settings in (
            ("user", bare.state, bare.settings),
            ("project", bare.project / ".mcp.json", bare.project / ".claude" / "settings.json")):
        settings.parent.mkdir(parents=True, exist_ok=True)
        layouts = {settings: b'{\n    "model": "opus",\n    "hooks": {\n        "Stop": []\n'
                             b'    }\n}\n',
                   server_file: b'{"mcpServers":{"db":{"command":"pg-mcp","args":[]}},'
                                b'"numStartups":3}'}
        for path, data in layouts.items():
            path.write_bytes(data)
        ok(bare.filemem("connect", "claude-code", "--scope", scope, with_claude=False))
        assert json.loads(server_file.read_text())["mcpServers"]["db"] == {
            "command": "pg-mcp", "args": []}
        assert settings.read_text().startswith('{\n    "model": "opus",\n    "hooks": {\n')
        ok(bare.filemem("disconnect", "claude-code", "--scope", scope, with_claude=False))
        assert {p: p.read_bytes() for p in layouts} == layouts
        # a machine where connect made the files: disconnect removes them again
        for path in layouts:
            path.unlink()
        ok(bare.filemem("connect", "claude-code", "--scope", scope, with_claude=False))
        ok(bare.filemem("disconnect", "claude-code", "--scope", scope, with_claude=False))
        assert not any(p.exists() for p in layouts)
    assert sorted(p.name for p in bare.project.iterdir()) == []


@pytest.mark.parametrize("before", [
    b'{\n  "hooks": {\n    "SessionStart": []\n  }\n}',
    b'{\n  "hooks": {}\n}',
    b'{}\n',
    b'{\n  "model": "opus",\n  "hooks": {\n    "Stop": [],\n    "SessionStart": []\n  }\n}',
])
def test_disconnect_keeps_the_empty_hooks_that_were_there_before(box: Box,
                                                                 before: bytes) -> None:
    box.settings.parent.mkdir()
    box.settings.write_bytes(before)
    ok(box.filemem("connect", "claude-code"))
    assert "session-start" in hook_command(box.settings)
    ok(box.filemem("connect", "claude-code"))  # again: the record still says what was there
    ok(box.filemem("disconnect", "claude-code"))
    assert box.settings.read_bytes() == before
    assert not (box.home / ".claude" / "filemem-connect.json").exists()
    # what connect made itself still goes
    box.settings.write_bytes(b'{\n  "model": "opus"\n}')
    ok(box.filemem("connect", "claude-code"))
    ok(box.filemem("disconnect", "claude-code"))
    assert box.settings.read_bytes() == b'{\n  "model": "opus"\n}'


def test_a_hook_group_shared_with_the_persons_handlers_keeps_theirs(bare: Box) -> None:
    theirs = {"type": "command", "command": "direnv export json > /dev/null"}
    old_ours = {"type": "command", "timeout": 5,
                "command": "'/old venv/bin/filemem' hook claude-code session-start --agent x"}
    bare.settings.parent.mkdir()
    bare.settings.write_text(json.dumps({"hooks": {"SessionStart": [
        {"matcher": "startup", "hooks": [theirs, old_ours]}]}}, indent=2))
    ok(bare.filemem("connect", "claude-code", with_claude=False))
    groups = json.loads(bare.settings.read_text())["hooks"]["SessionStart"]
    assert len(groups) == 1 and groups[0]["matcher"] == "startup"  # replaced in place
    assert groups[0]["hooks"][0] == theirs
    assert groups[0]["hooks"][1]["command"].startswith(f"{FILEMEM} hook claude-code")
    ok(bare.filemem("disconnect", "claude-code", with_claude=False))
    assert json.loads(bare.settings.read_text()) == {"hooks": {"SessionStart": [
        {"matcher": "startup", "hooks": [theirs]}]}}


def test_a_linked_settings_file_is_written_through_the_link(bare: Box) -> None:
    dotfiles = bare.home / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_bytes(b'{\n  "theme": "dark"\n}')
    bare.settings.parent.mkdir()
    bare.settings.symlink_to(dotfiles)
    ok(bare.filemem("connect", "claude-code", with_claude=False))
    assert bare.settings.is_symlink() and "session-start" in dotfiles.read_text()
    ok(bare.filemem("disconnect", "claude-code", with_claude=False))
    assert bare.settings.is_symlink() and dotfiles.read_bytes() == b'{\n  "theme": "dark"\n}'


# ---------------------------------------------------------------- bad input changes nothing


@pytest.mark.parametrize("which,content,says", [
    ("settings", '{\n  "model": "opus",\n}\n', "line 3 column 1"),
    ("settings", '{\n  // my settings\n  "model": "opus"\n}', "line 2 column 3"),
    ("settings", '{"hooks": {"SessionStart": {"hooks": []}}}',
     '"hooks.SessionStart" is a JSON object, not an array'),
    ("settings", '{"hooks": [1]}', '"hooks" is a JSON array, not an object'),
    ("settings", '{"hooks": {"SessionStart": null}}', '"hooks.SessionStart" is a JSON null'),
    ("state", '{"mcpServers": null}', '"mcpServers" is a JSON null, not an object'),
    ("settings", '{"model": "a", "model": "b"}', 'line 1 column 16: the key "model" appears '
                                                  "twice"),
    ("settings", '{\n  "a": "\\"x\\" {",\n  "b": {"a": 1, "a": 2}\n}',
     'line 3 column 17: the key "a" appears twice'),
    ("settings", '{"n": NaN}', "line 1 column 7: NaN is not JSON"),
    ("settings", '["not", "an", "object"]', "holds a JSON array, not an object"),
    ("state", '{"mcpServers": {"filemem": ', "line 1 column 28"),
])
def test_a_file_that_is_not_valid_json_is_never_overwritten(box: Box, which: str,
                                                           content: str, says: str) -> None:
    path = box.settings if which == "settings" else box.state
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    out = box.filemem("connect", "claude-code")
    assert out.returncode == 1, out.stdout
    assert f"filemem: CONFIG_INVALID: {path}: " in out.stderr and says in out.stderr
    assert "it was not changed" in out.stderr and "then run the command again" in out.stderr
    assert path.read_text() == content
    other = box.state if which == "settings" else box.settings
    assert not other.exists()  # nothing else was touched either
    assert not box.store.exists()  # the default store is made only by a connect that happens
    gone = box.filemem("disconnect", "claude-code")
    assert gone.returncode == 1 and path.read_text() == content


def test_a_server_named_filemem_that_is_not_filemem_is_left_alone(box: Box) -> None:
    ok(box.run_claude("mcp", "add", "--scope", "user", "filemem", "--", "/usr/bin/other"))
    state = box.state.read_bytes()
    out = box.filemem("connect", "claude-code")
    assert out.returncode == 1 and "NAME_TAKEN" in out.stderr
    assert "'/usr/bin/other'" in out.stderr and "claude mcp remove filemem" in out.stderr
    assert box.state.read_bytes() == state and not box.settings.exists()
    gone = ok(box.filemem("disconnect", "claude-code"))
    assert "left alone (it does not run filemem)" in gone and box.state.read_bytes() == state


# ---------------------------------------------------------------- interrupted connect

# connect, dying (or failing) just before it replaces settings.json, after the server step
DYING = """
import os, sys
import filemem.files.atomic as atomic
how = sys.argv.pop(1)
real = atomic.atomic_write
def atomic_write(path, data, **kw):
    if path.endswith("settings.json"):
        if how == "kill":
            os._exit(9)
        raise OSError(28, "No space left on device")
    return real(path, data, **kw)
atomic.atomic_write = atomic_write
from filemem.cli import main
sys.argv[0] = sys.argv.pop(1)
main()
"""


@pytest.mark.parametrize("with_claude", [True, False])
def test_a_connect_killed_before_the_hook_leaves_each_file_before_or_after(
        box: Box, with_claude: bool) -> None:
    box.settings.parent.mkdir(parents=True)
    box.settings.write_bytes(b'{\n  "model": "opus"\n}')
    killed = subprocess.run([sys.executable, "-c", DYING, "kill", str(FILEMEM), "connect",
                             "claude-code"], cwd=box.project, capture_output=True, text=True,
                            env=box.env(with_claude=with_claude), timeout=180)
    assert killed.returncode == 9, killed.stderr
    assert box.settings.read_bytes() == b'{\n  "model": "opus"\n}'  # as it was
    state = json.loads(box.state.read_text())
    assert state["mcpServers"]["filemem"]["args"] == ["mcp", "--agent", "claude-code"]
    out = ok(box.filemem("connect", "claude-code", with_claude=with_claude))  # finishes
    assert "unchanged" in out and "SessionStart hook in ~/.claude/settings.json: added" in out
    assert json.loads(box.settings.read_text())["model"] == "opus"


@pytest.mark.parametrize("with_claude,scope", [(True, "user"), (False, "user"),
                                              (True, "project")])
def test_a_connect_that_cannot_write_the_hook_undoes_the_server(box: Box, with_claude: bool,
                                                                scope: str) -> None:
    settings = box.settings if scope == "user" else box.project / ".claude" / "settings.json"
    server_file = box.state if scope == "user" else box.project / ".mcp.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{\n  "model": "opus"\n}')
    if with_claude:
        ok(box.run_claude("mcp", "list"))  # Claude Code's own first-run bookkeeping
    before = server_file.read_bytes() if server_file.exists() else None
    failed = subprocess.run([sys.executable, "-c", DYING, "fail", str(FILEMEM), "connect",
                             "claude-code", "--scope", scope], cwd=box.project,
                            capture_output=True, text=True,
                            env=box.env(with_claude=with_claude), timeout=180)
    assert failed.returncode == 1, failed.stderr
    assert settings.read_bytes() == b'{\n  "model": "opus"\n}'
    if with_claude and scope == "user":
        assert "filemem" not in json.loads(server_file.read_text()).get("mcpServers", {})
    else:
        assert before is None and not server_file.exists()
    assert "CONFIG_UNWRITABLE" in failed.stderr and "No space left on device" in failed.stderr
    assert "the MCP server registration made before it was undone" in failed.stderr


# ---------------------------------------------------------------- Claude Code's auto-memory

MEMORY_FILE = """---
name: db tests
description: Integration tests hit a real database, never mocks
metadata:
  type: feedback
---

Integration tests hit a real database, never mocks.
"""


def auto_memory(box: Box) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(box.project))  # Claude Code's rule (ASCII paths)
    folder = box.home / ".claude" / "projects" / slug / "memory"
    folder.mkdir(parents=True)
    (folder / "feedback_db_tests.md").write_text(MEMORY_FILE)
    (folder / "MEMORY.md").write_text("- [db tests](feedback_db_tests.md) — real database\n")
    return folder


def test_connect_offers_the_projects_auto_memory_once(box: Box) -> None:
    folder = auto_memory(box)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    out = ok(box.filemem("connect", "claude-code", "--yes"))
    assert f"Claude Code has 1 memory for this project in ~/{folder.relative_to(box.home)}" \
        in out and "Imported 1 memory" in out
    with filemem.open_store(box.store) as p:
        entries = p.list_entries()
    assert [(e["track"], e["scope"], e["workspaceKey"], e["agentKey"], e["source"])
            for e in entries] == [("user", "workspace", str(box.project), "claude-code",
                                   "claude-code-memory-md")]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # not changed
    again = ok(box.filemem("connect", "claude-code", "--yes"))
    assert "is already in filemem (1 memory)" in again
    assert len(box.rows("seed")) == 1  # one approval, one commit, not two


def test_connect_disconnect_connect_never_imports_twice(box: Box) -> None:
    """The offer leaves out what `filemem import` would: a memory changed in filemem since
    it was imported is not offered again (its file is the one imported before)."""
    folder = auto_memory(box)
    ok(box.filemem("connect", "claude-code", "--yes"))
    ok(box.filemem("replace", "--yes", "--track", "user", "--scope", "workspace", "--agent",
                   "claude-code", "--workspace", str(box.project), "real database",
                   "Integration tests hit a real Postgres 17, never mocks"))
    ok(box.filemem("disconnect", "claude-code"))
    again = ok(box.filemem("connect", "claude-code", "--yes"))
    assert "is already in filemem (1 memory)" in again and "Imported" not in again
    with filemem.open_store(box.store) as p:
        assert [e["text"] for e in p.list_entries()] == [
            "Integration tests hit a real Postgres 17, never mocks"]
    assert len(box.rows("seed")) == 1
    # `filemem import` itself agrees: nothing to import
    out = ok(box.filemem("import", "--adapter", "claude-code-memory-md", str(folder),
                         "--workspace", str(box.project), "--agent", "claude-code", "--yes"))
    assert len(box.rows("seed")) == 1, out
    # a new memory file in the folder is offered, alone
    (folder / "project_ci.md").write_text("---\nname: ci\ndescription: CI runs on Debian\n"
                                          "metadata:\n  type: project\n---\n\nCI runs on "
                                          "Debian 13.\n")
    third = ok(box.filemem("connect", "claude-code", "--yes"))
    assert "Claude Code has 1 memory for this project" in third and "Imported 1 memory" in third
    with filemem.open_store(box.store) as p:
        assert len(p.list_entries()) == 2


def test_without_a_terminal_the_import_waits_once_as_a_pending_approval(box: Box) -> None:
    """Nobody to ask: the import is staged, connect says how to approve it, and running it
    again (or the `filemem import` it used to suggest) stages nothing more."""
    folder = auto_memory(box)
    out = ok(box.filemem("connect", "claude-code"))  # stdin is /dev/null
    pending = json.loads(ok(box.filemem("pending", "--json")))
    assert len(pending) == 1
    pid = pending[0]["id"]
    assert (f"Not imported yet: nobody could be asked here, so the import waits as pending "
            f"approval {pid}: see it with `filemem pending`, import it with `filemem approve "
            f"{pid}` (or drop it with `filemem reject {pid}`)") in out
    said = out + box.filemem("connect", "claude-code").stderr
    assert "To import later" not in said and "WRITE_DENIED" not in said
    again = ok(box.filemem("connect", "claude-code"))
    assert (f"The import of 1 memory from Claude Code's auto-memory for this project "
            f"(~/{folder.relative_to(box.home)}) already waits as pending approval {pid}") \
        in again and "Claude Code has" not in again
    imported = ok(box.filemem("import", "--adapter", "claude-code-memory-md", str(folder),
                              "--workspace", str(box.project), "--agent", "claude-code"))
    assert f"waiting in pending approval {pid}" in imported
    assert [p["id"] for p in json.loads(ok(box.filemem("pending", "--json")))] == [pid]
    ok(box.filemem("approve", pid))
    with filemem.open_store(box.store) as p:
        assert len(p.list_entries()) == 1
    assert "is already in filemem (1 memory)" in ok(box.filemem("connect", "claude-code"))


def test_the_import_offer_is_declined_at_the_terminal(box: Box,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import run_at_terminal

    auto_memory(box)
    env = box.env()
    for key in set(os.environ) - set(env):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(box.project)
    code, seen = run_at_terminal(["connect", "claude-code"], b"n\n")
    assert code == 0, seen
    assert "Integration tests hit a real database" in seen and "Approve this write?" in seen
    assert "Not imported (you declined). To import later: filemem import --adapter " \
           "claude-code-memory-md" in seen
    with filemem.open_store(box.store) as p:
        assert p.list_entries() == []
    assert len(box.rows("seed-denied")) == 1  # the refusal is recorded


def test_in_a_subfolder_the_hint_imports_where_connect_would(
        box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in a repository's subfolder, connect offers the repository's auto-memory for the
    subfolder's workspace; the `filemem import` it prints when declined does the same."""
    import shlex

    from tests.conftest import run_at_terminal

    sub = box.project / "src"
    sub.mkdir()
    subprocess.run(["git", "init", "-q", str(box.project)], check=True)
    auto_memory(box)  # keyed by the repository's root
    env = box.env()
    for key in set(os.environ) - set(env):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(sub)
    code, seen = run_at_terminal(["connect", "claude-code"], b"n\n")
    assert code == 0, seen
    line = next(x for x in seen.splitlines() if "To import later: " in x)
    hint = shlex.split(line.split("To import later: ", 1)[1])
    assert hint[hint.index("--workspace") + 1] == str(sub)
    ok(box.filemem(*hint[1:], "--yes", cwd=box.home))  # from anywhere: it names it all
    with filemem.open_store(box.store) as p:
        assert [e["workspaceKey"] for e in p.list_entries()] == [str(sub)]
    again = ok(box.filemem("connect", "claude-code", "--yes", cwd=sub))
    assert "is already in filemem (1 memory)" in again and "Imported" not in again


def test_auto_memory_folder_is_the_one_claude_code_uses(box: Box,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code makes a project's memory folder when a session starts: for a session in
    a repository's subfolder it is the repository's, whatever the folder's name."""
    from filemem.owner.claude_session import auto_memory_dir, project_slug

    repo = box.project.parent / "repo 名前 🚀"
    sub = repo / "src"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with fake_api() as api:
        host, port = api.server_address[:2]
        out = box.run_claude("-p", "hello", cwd=sub,
                             ANTHROPIC_BASE_URL=f"http://{host!s}:{port}",
                             ANTHROPIC_API_KEY="sk-test-not-a-key")
    assert out.returncode == 0, out.stderr
    made = sorted(p.parent.name for p in (box.home / ".claude" / "projects").glob("*/memory"))
    monkeypatch.setenv("HOME", str(box.home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert [Path(auto_memory_dir(str(sub))).parent.name] == made
    assert made == [project_slug(str(repo))]


def test_the_ledger_finds_a_sessions_snapshot_row_wherever_it_lies(tmp_path: Path) -> None:
    """The row a resumed session gets back, in a ledger of several MiB: across the reader's
    1 MiB chunk boundaries, behind torn lines and other sessions' rows."""
    from filemem.store.auditlog import Ledger, row

    ledger = Ledger(str(tmp_path))
    assert ledger.last_row("snapshot", "s") is None  # no ledger yet
    big = "x" * 300_000

    def append(action: str, sid: str, text: str) -> None:
        r = row(action, text=text, outcome="ok", session_id=sid)
        r["seq"], r["ts"] = 1, 1
        ledger.append([r])

    for i in range(12):
        append("snapshot", f"other-{i}", big)
        append("recalled", "s", f"not a snapshot {i}")  # same session, other action
        if i == 4:
            append("snapshot", "s", f"first {big}")
        if i == 9:
            append("snapshot", "s", f"newest é 🚀 {big}")
            with open(ledger.path, "ab") as f:
                f.write(b'{"seq":1,"action":"snapshot","sessionId":"s"')  # torn, no newline
    assert os.path.getsize(ledger.path) > 3 * 1024 * 1024
    found = ledger.last_row("snapshot", "s")
    assert found is not None and found["text"] == f"newest é 🚀 {big}"
    assert ledger.last_row("snapshot", "other-0") is not None
    assert ledger.last_row("snapshot", "nobody") is None
    assert ledger.last_row("snapshot", 's","x') is None  # an id is matched whole
