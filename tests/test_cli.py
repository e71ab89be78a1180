"""The real `filemem` command, run in subprocesses (and at a real pseudo-terminal)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.rules import snapshot as snapshot_rules
from tests.conftest import BIG, assert_clean_repo, ctx, git, run_at_terminal, run_cli

ENTRY_FIELDS = {"id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
                "version", "createdAt", "updatedAt", "lastRecalled", "recallCount",
                "sessionId"}
ROW_FIELDS = {"seq", "ts", "action", "track", "scope", "entryId", "text", "outcome", "source",
              "sessionId"}
COMMANDS = ["init", "path", "add", "replace", "remove", "consolidate", "query", "list",
            "budgets", "audit", "export", "import", "snapshot"]


def ok(*args: str, store: Path | None = None, input: str | None = None,
       env: dict[str, str] | None = None) -> str:
    out = run_cli(*args, store=store, input=input, env=env)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


def as_json(*args: str, store: Path | None = None) -> Any:
    return json.loads(ok(*args, "--json", store=store))


def commits(path: Path) -> int:
    return int(git(path, "rev-list", "--count", "HEAD"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    assert "Created a filemem store at" in ok("init", str(path))
    return path


# ---------------------------------------------------------------- init, path, help


def test_init_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mem"
    assert ok("init", str(path)).strip() == f"Created a filemem store at {path}"
    head = git(path, "rev-parse", "HEAD")
    assert_clean_repo(path)
    assert "nothing changed" in ok("init", str(path))
    assert json.loads(ok("init", str(path), "--json")) == {"path": str(path), "created": False}
    assert git(path, "rev-parse", "HEAD") == head
    assert commits(path) == 1
    assert_clean_repo(path)
    # a folder with other things in it is not turned into a store
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine", encoding="utf-8")
    out = run_cli("init", str(tmp_path / "busy"))
    assert out.returncode == 4 and "not empty" in out.stderr
    assert not (tmp_path / "busy" / ".git").exists()


def test_path_and_store_selection(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for p in (a, b, c):
        ok("init", str(p))
    clear = {"FILEMEM_STORE": "", "FILEMEM_HOME": ""}
    assert ok("path", store=a).strip() == str(a)
    assert ok("path", env={**clear, "FILEMEM_STORE": str(b)}).strip() == str(b)
    assert ok("path", env={**clear, "FILEMEM_HOME": str(c)}).strip() == str(c)
    # FILEMEM_STORE wins over FILEMEM_HOME, --store over both
    both = {"FILEMEM_STORE": str(b), "FILEMEM_HOME": str(c)}
    assert ok("path", env=both).strip() == str(b)
    assert ok("path", store=a, env=both).strip() == str(a)
    assert json.loads(ok("path", "--json", env=both)) == {"path": str(b)}
    ok("add", "--yes", "in a", store=a, env=both)
    ok("add", "--yes", "in b", env={**clear, "FILEMEM_STORE": str(b)})
    ok("add", "--yes", "in c", env={**clear, "FILEMEM_HOME": str(c)})
    for p, text in ((a, "in a"), (b, "in b"), (c, "in c")):
        assert [e["text"] for e in as_json("list", store=p)] == [text]
    # no store where the variables point: exit 4, with a hint
    out = run_cli("list", env={**clear, "FILEMEM_STORE": str(tmp_path / "none")})
    assert out.returncode == 4 and "filemem init" in out.stderr


def test_help_of_every_command() -> None:
    top = run_cli("--help")
    assert top.returncode == 0
    for name in COMMANDS:
        assert name in top.stdout
        out = run_cli(name, "--help")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("Usage:") and name in out.stdout.splitlines()[0]
    assert "--yes" in run_cli("add", "--help").stdout
    assert "--json" in run_cli("query", "--help").stdout


def test_every_command_that_reports_takes_json() -> None:
    """--json on every command that reads or changes memory: all but the two servers, which
    speak JSON-RPC themselves, and export, whose output is JSON already."""
    from click import Context, Group

    from filemem.cli import main

    def leaves(group: Group, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        ctx = Context(group)
        for name in group.list_commands(ctx):  # the CLI loads its commands when asked
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, Group):
                out += leaves(cmd, (*prefix, name))
            else:
                out.append((*prefix, name))
        return out

    without = {("bridge",), ("mcp",), ("export",)}
    agents = ("connect", "disconnect", "hook")  # agents' own files, not memory
    commands = [c for c in leaves(main, ()) if c[0] not in agents]
    assert ("path",) in commands and ("remote", "list") in commands
    missing = [" ".join(c) for c in commands if c not in without
               and "--json" not in run_cli(*c, "--help").stdout]
    assert missing == []


# ---------------------------------------------------------------- writes with --yes


def test_write_commands_with_yes(store: Path) -> None:
    n = commits(store)
    out = ok("add", "--yes", "--track", "user", "--scope", "user-global", "--tag", "pref",
             "--session", "cli-1", "Prefers", "short", "answers", store=store)
    assert out.startswith("Added ") and "user/user-global: 21/2000 chars used" in out
    added = json.loads(ok("add", "--yes", "--json", "--workspace", "/work/api", "--agent",
                          "coder", "Uses pytest", store=store))
    entry = added["entry"]
    assert set(entry) == ENTRY_FIELDS
    assert (entry["workspaceKey"], entry["agentKey"], entry["scope"]) == \
        ("/work/api", "coder", "workspace")
    assert added["usage"] == {"track": "user", "scope": "workspace", "used": 11, "limit": 2000}
    ok("add", "--yes", "--workspace", "/work/api", "--agent", "coder", "Uses ruff", store=store)
    assert commits(store) == n + 3
    assert_clean_repo(store)

    out = ok("replace", "--yes", "--track", "user", "--scope", "user-global", "short",
             "Prefers", "very", "short", "answers", store=store)
    assert "now version 2" in out
    out = ok("consolidate", "--yes", "--workspace", "/work/api", "--agent", "coder",
             "pytest", "ruff", "--into", "Uses pytest and ruff", store=store)
    assert out.startswith("Consolidated 2 entries into ")
    removed = json.loads(ok("remove", "--yes", "--json", "--track", "user", "--scope",
                            "user-global", "very short", store=store))
    assert removed["entry"]["text"] == "Prefers very short answers"
    assert commits(store) == n + 6
    assert_clean_repo(store)
    listed = as_json("list", store=store)
    assert [e["text"] for e in listed] == ["Uses pytest and ruff"]
    actions = git(store, "log", "--format=%(trailers:key=Audit-Action,valueonly)").split()
    assert actions[:7] == ["remove", "consolidate-remove", "consolidate-remove",
                           "consolidate-add", "replace", "add", "add"]
    outcome = as_json("audit", "--limit", "1", store=store)[0]["outcome"]
    assert "--yes on the command line" in outcome


def test_text_from_stdin_is_kept_byte_for_byte(store: Path) -> None:
    text = "  first line\r\n---\nkey: value\n\u4e2d\u6587 \U0001f600 trailing  \n\n"
    ok("add", "--yes", "-", store=store, input=text)
    assert [e["text"] for e in as_json("list", store=store)] == [text]
    ok("replace", "--yes", "first line", "-", store=store, input="second\r\n")
    assert [e["text"] for e in as_json("list", store=store)] == ["second\r\n"]


# ---------------------------------------------------------------- reads, with and without --json


def test_reads_in_text_and_json(store: Path) -> None:
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "Prefers tea", store=store)
    ok("add", "--yes", "--track", "agent", "--scope", "workspace", "--workspace", "/w/p",
       "Runs make test", store=store)
    head = git(store, "rev-parse", "HEAD")

    result = as_json("query", "tea", store=store)
    assert set(result) == {"entries", "total", "truncated"}
    assert result["total"] == 1 and not result["truncated"]
    assert set(result["entries"][0]) == ENTRY_FIELDS
    text = ok("query", "TEA", store=store)  # ASCII letters match without case
    assert "Prefers tea" in text and result["entries"][0]["id"][:8] in text
    assert ok("query", "nothing-like-this", store=store).strip() == "No entry matched."
    limited = as_json("query", "--limit", "1", store=store)
    assert len(limited["entries"]) == 1 and limited["truncated"] and limited["total"] == 2
    # --workspace narrows to what that session sees
    seen = as_json("query", "--workspace", "/elsewhere", store=store)
    assert [e["text"] for e in seen["entries"]] == ["Prefers tea"]

    listed = as_json("list", store=store)
    assert [e["text"] for e in listed] == ["Prefers tea", "Runs make test"]
    assert all(set(e) == ENTRY_FIELDS for e in listed)
    assert [e["text"] for e in as_json("list", "--track", "agent", store=store)] == \
        ["Runs make test"]
    text = ok("list", store=store)
    assert "user/user-global" in text and "Runs make test" in text

    rows = as_json("budgets", store=store)
    assert [(r["track"], r["scope"]) for r in rows] == [
        ("user", "user-global"), ("user", "workspace"), ("agent", "user-global"),
        ("agent", "workspace")]
    assert rows[0]["used"] == 11 and rows[3]["used"] == 14
    assert "user/user-global: 11/2000 chars used" in ok("budgets", store=store)

    audit = as_json("audit", "--limit", "3", store=store)
    assert len(audit) == 3 and all(set(r) == ROW_FIELDS for r in audit)
    assert [r["action"] for r in audit] == ["add", "add", "init"]  # sessionless reads: no row
    ok("query", "tea", "--session", "Q1", store=store)
    recalled = as_json("audit", "--limit", "1", store=store)[0]
    assert (recalled["action"], recalled["sessionId"], recalled["text"]) == \
        ("recalled", "Q1", "tea")
    text = ok("audit", store=store)
    assert " add user/user-global " in text and "Prefers tea" in text
    assert git(store, "rev-parse", "HEAD") == head  # reads made no commit
    assert_clean_repo(store)


def test_export_and_import(store: Path, tmp_path: Path) -> None:
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "--tag", "a", "one",
       store=store)
    ok("add", "--yes", "--agent", "coder", "two", store=store)
    doc = json.loads(ok("export", store=store))
    assert doc["schema"] == "memory-export-v1" and doc["plugin"] == "dsh-memento"
    assert [e["text"] for e in doc["entries"]] == ["one", "two"]
    out_file = tmp_path / "backup.json"
    out = run_cli("export", "--out", str(out_file), store=store)
    assert out.returncode == 0 and out.stdout == ""
    assert "Wrote 2 entries" in out.stderr
    assert json.loads(out_file.read_text(encoding="utf-8"))["entries"] == doc["entries"]

    other = tmp_path / "other"
    ok("init", str(other))
    assert ok("import", "--yes", str(out_file), store=other).strip() == \
        "Imported 2 entries in one commit."
    assert commits(other) == 2
    imported = as_json("list", store=other)
    assert sorted((e["text"], e["tags"], e["agentKey"]) for e in imported) == \
        [("one", ["a"], ""), ("two", [], "coder")]
    assert {e["id"] for e in imported}.isdisjoint({e["id"] for e in doc["entries"]})
    assert all(e["version"] == 1 for e in imported)
    # from stdin too, and a broken file is INVALID_INPUT with nothing imported
    ok("import", "--yes", "-", store=other, input=out_file.read_text(encoding="utf-8"))
    assert len(as_json("list", store=other)) == 4
    bad = run_cli("import", "--yes", "-", store=other, input="{not json")
    assert bad.returncode == 1 and "INVALID_INPUT" in bad.stderr
    assert commits(other) == 3
    assert_clean_repo(other)


def test_snapshot_text_is_the_audited_text(store: Path) -> None:
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "Prefers tea", store=store)
    ok("add", "--yes", "--workspace", "/w/p", "--agent", "coder", "Coder note", store=store)
    ok("add", "--yes", "--workspace", "/w/p", "--agent", "other", "Other note", store=store)
    out = ok("snapshot", "--workspace", "/w/p", "--agent", "coder", "--session", "S1",
             store=store)
    assert "Prefers tea" in out and "Coder note" in out and "Other note" not in out
    row = as_json("audit", "--limit", "1", store=store)[0]
    assert row["action"] == "snapshot" and row["sessionId"] == "S1"
    assert out == row["text"] + ("" if row["text"].endswith("\n") else "\n")
    # what a `filemem mcp` session gets: filemem's header naming the MCP server's tools
    assert out.startswith("[filemem: frozen memory snapshot") and "dsh-memento" not in out
    assert out.splitlines()[0].endswith(
        "use the memory_add, memory_replace, memory_remove or memory_consolidate tool.]")
    hooked = ok("snapshot", "--workspace", "/w/p", "--tools", "remember, forget", store=store)
    assert hooked.splitlines()[0].endswith("use the remember or forget tool.]")
    bad = run_cli("snapshot", "--tools", "two words", store=store)
    assert bad.returncode == 1 and "INVALID_INPUT" in bad.stderr and "snapshot tools" in bad.stderr

    shown = as_json("snapshot", "--workspace", "/w/p", "--session", "S2", store=store)
    assert shown["sessionId"] == "S2"
    row = as_json("audit", "--limit", "1", store=store)[0]
    assert row["action"] == "snapshot" and row["sessionId"] == "S2"
    assert shown["text"] == row["text"]
    # without --agent the session sees the shared layer only
    assert "Prefers tea" in shown["text"] and "note" not in shown["text"]
    # an empty snapshot says in words that there are no memories yet, and that is what the
    # audit row records; the protocol's own face stays '' (the bridge, the Python API)
    empty = store.parent / "empty"
    ok("init", str(empty))
    nothing = run_cli("snapshot", "--session", "S3", store=empty)
    assert nothing.returncode == 0 and nothing.stderr == ""
    assert nothing.stdout == snapshot_rules.EMPTY["en"] + "\n"
    assert "no memories yet" in nothing.stdout
    row = as_json("audit", "--limit", "1", store=empty)[0]
    assert row["action"] == "snapshot" and row["text"] == snapshot_rules.EMPTY["en"]
    assert "\u8fd8\u6ca1\u6709\u8bb0\u5fc6" in ok("snapshot", "--language", "zh", store=empty)
    with filemem.open_store(empty) as p:
        assert p.snapshot({"id": "api", "header": {"cwd": "/w/p"}}) == ""


# ---------------------------------------------------------------- exit codes and errors


def test_exit_codes(store: Path) -> None:
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "Prefers tea", store=store)
    n = commits(store)
    usage = run_cli("add", "--yes", "--no-such-option", "x", store=store)
    assert usage.returncode == 2 and "No such option" in usage.stderr
    assert run_cli("query", "--limit", "many", store=store).returncode == 2
    assert run_cli("add", "--yes", "--track", "robot", "x", store=store).returncode == 2

    cases = [
        (("add", "--yes", "--tag", " ", "text"), "INVALID_INPUT"),
        (("remove", "--yes", "--track", "user", "--scope", "user-global", "coffee"),
         "ENTRY_NOT_FOUND"),
        (("add", "--yes", "--track", "user", "--scope", "user-global", "x" * 2001),
         "BUDGET_EXCEEDED"),
    ]
    for args, code in cases:
        out = run_cli(*args, store=store)
        assert out.returncode == 1, (args, out.stderr)
        assert out.stderr.startswith(f"filemem: {code}: ")
        err = json.loads(run_cli(*args, "--json", store=store).stdout)["error"]
        assert err["code"] == code and err["message"]
    budget = json.loads(run_cli(*cases[2][0], "--json", store=store).stdout)["error"]
    assert budget["details"] == {"track": "user", "scope": "user-global", "used": 11,
                                 "limit": 2000, "needed": 11 + 2001}
    assert commits(store) == n  # refused before approval: no commit, no row
    assert_clean_repo(store)


def test_write_without_yes_and_no_terminal_is_staged(store: Path) -> None:
    """Nobody to ask (stdin is not a terminal, no --yes): the write is staged as a pending
    approval for the owner, not written and not lost (exit 3, WRITE_DENIED `pending`)."""
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "Prefers tea", store=store)
    n = commits(store)
    for args in (("add", "Prefers coffee"),
                 ("replace", "--track", "user", "--scope", "user-global", "tea", "green tea"),
                 ("remove", "--track", "user", "--scope", "user-global", "tea")):
        out = run_cli(*args, store=store)  # stdin is /dev/null: nobody to ask
        assert out.returncode == 3, out.stderr
        assert "WRITE_DENIED" in out.stderr and "pending" in out.stderr
        assert "filemem approve" in out.stderr
        row = as_json("audit", "--limit", "1", store=store)[0]
        assert row["action"] == f"{args[0]}-pending"
        assert row["outcome"].startswith("pending")
    assert [e["text"] for e in as_json("list", store=store)] == ["Prefers tea"]
    assert [r["payload"]["action"] for r in as_json("pending", store=store)] == \
        ["add", "replace", "remove"]
    assert commits(store) == n + 3  # three audit-only commits
    assert git(store, "diff", "--stat", "HEAD~3", "HEAD") == ""
    assert_clean_repo(store)


# ---------------------------------------------------------------- the prompt at a real terminal


def test_prompt_yes_writes(store: Path) -> None:
    n = commits(store)
    code, screen = run_at_terminal(["add", "--track", "user", "--scope", "user-global",
                                    "--session", "tty-1", "--store", str(store),
                                    "Prefers replies in Chinese"], b"y\n")
    assert code == 0, screen
    assert "Add a memory entry to user/user-global:" in screen
    assert "Prefers replies in Chinese" in screen.split("Approve this write?")[0]
    assert "session tty-1" in screen and "[y/N]" in screen
    assert "Added " in screen
    assert [e["text"] for e in as_json("list", store=store)] == ["Prefers replies in Chinese"]
    assert commits(store) == n + 1
    outcome = as_json("audit", "--limit", "1", store=store)[0]["outcome"]
    assert outcome.startswith("allowed-once") and "terminal prompt" in outcome
    assert_clean_repo(store)

    # a replace shows the old and the new text in full before asking
    code, screen = run_at_terminal(["replace", "--track", "user", "--scope", "user-global",
                                    "--store", str(store), "Chinese", "Prefers", "English"],
                                   b"y\n")
    assert code == 0, screen
    asked = screen.split("Approve this write?")[0]
    assert ("│ from:\n│ Prefers replies in Chinese\n│\n│ to:\n│ Prefers English\n"
            "└─ end of text") in asked
    assert [e["text"] for e in as_json("list", store=store)] == ["Prefers English"]


@pytest.mark.parametrize("answer", [b"\n", b"n\n"], ids=["enter", "n"])
def test_prompt_default_is_no(answer: bytes, store: Path) -> None:
    n = commits(store)
    code, screen = run_at_terminal(["add", "--store", str(store), "Never", "stored"], answer)
    assert code == 3, screen
    assert "Never stored" in screen.split("Approve this write?")[0]
    assert "WRITE_DENIED" in screen and "rejected" in screen
    assert as_json("list", store=store) == []
    assert commits(store) == n + 1  # only the denied row
    row = as_json("audit", "--limit", "1", store=store)[0]
    assert row["action"] == "add-denied" and row["outcome"].startswith("rejected")
    assert row["text"] == "Never stored"
    assert_clean_repo(store)


def test_list_and_query_show_each_layer_in_columns(tmp_path: Path) -> None:
    """One line an entry: the id's start, the layer, the workspace (the home folder as ~,
    a user-global entry as all workspaces), the agent layer, the text on one line."""
    home = tmp_path / "home"
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, budgets=BIG, write_policy="auto") as p:
        p.add({"track": "user", "scope": "user-global", "text": "Prefers tabs"}, ctx())
        for where in ("proj", "other"):
            p.add({"track": "agent", "scope": "workspace", "text": f"Builds {where}\nwith make"},
                  ctx(cwd=str(home / where)))
        p.add({"track": "agent", "scope": "workspace", "text": "Outside home"},
              filemem.write_context(cwd="/srv/app", agent="coder"))
    env = {"HOME": str(home)}
    lines = run_cli("list", store=store, env=env).stdout.splitlines()
    assert len(lines) == 4
    cells = [re.split(" {2,}", line) for line in lines]
    assert [c[1:] for c in cells] == [
        ["user/user-global", "all workspaces", "shared", "Prefers tabs"],
        ["agent/workspace", "~/proj", "shared", "Builds proj \u21b5 with make"],
        ["agent/workspace", "~/other", "shared", "Builds other \u21b5 with make"],
        ["agent/workspace", "/srv/app", "agent coder", "Outside home"],
    ]
    assert len({len(line.split("  ")[0]) for line in lines}) == 1  # the ids' 8 characters
    found = run_cli("query", "Builds", store=store, env=env).stdout.splitlines()
    assert sorted(re.split(" {2,}", line) for line in found) == sorted(cells[1:3])
