"""The shipped adapters on realistic files written for these tests (tests/fixtures/adapters):
what each format gives, what comes back, and every refusal with its code and location."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import filemem
from filemem.adapters import default_registry

FIX = Path(__file__).resolve().parent / "fixtures" / "adapters"
CLAUDE_DIR = FIX / "claude" / "projects" / "-Users-me-code-api" / "memory"
DELIM = "\n\u00a7\n"
HERMES, CLAUDE, MEM0 = "hermes-memory-md", "claude-code-memory-md", "mem0"


def read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def directory(path: Path) -> dict[str, Any]:
    return {"files": {p.name: read(p) for p in sorted(path.iterdir()) if p.is_file()},
            "path": str(path)}


def adapt(aid: str, payload: Any) -> list[dict[str, Any]]:
    return default_registry().adapt(aid, payload)


def export(aid: str, entries: list[dict[str, Any]]) -> Any:
    return default_registry().export(aid, entries)


def bare(entry: dict[str, Any]) -> dict[str, Any]:
    """An adapted entry without the adapter's round-trip metadata."""
    return {k: v for k, v in entry.items() if k != "meta"}


def refused(aid: str, payload: Any, *, exporting: bool = False) -> filemem.ProtocolError:
    with pytest.raises(filemem.ProtocolError) as info:
        (export if exporting else adapt)(aid, payload)
    assert info.value.code == "ADAPTER_PAYLOAD"
    assert info.value.details["adapterId"] == aid
    assert info.value.message.startswith(f'adapter "{aid}": ')
    return info.value


def entry(text: str, track: str = "user", scope: str = "user-global",
          tags: list[str] | None = None, **more: Any) -> dict[str, Any]:
    return {"track": track, "scope": scope, "text": text, "tags": tags or [], **more}


# ================================================================ Hermes


def test_hermes_delimited_files() -> None:
    entries = adapt(HERMES, directory(FIX / "hermes"))
    memory = [e for e in entries if e["track"] == "agent"]
    user = [e for e in entries if e["track"] == "user"]
    assert [e["text"] for e in memory] == read(FIX / "hermes" / "MEMORY.md").split(DELIM)
    assert [e["text"] for e in user] == read(FIX / "hermes" / "USER.md").split(DELIM)
    assert entries == memory + user  # MEMORY.md first, each in file order
    assert {(e["scope"], e["source"], tuple(e["tags"])) for e in entries} == \
        {("user-global", HERMES, ())}
    multi = next(e["text"] for e in memory if e["text"].startswith("Release checklist"))
    assert multi.count("\n") == 3
    assert any("\u00a7 4.2" in e["text"] for e in memory)  # a bare § in a line is text
    assert any("🐘" in e["text"] for e in memory) and any("中文" in e["text"] for e in user)


@pytest.mark.parametrize("folder", ["hermes", "hermes-at-budget"])
def test_hermes_import_export_is_byte_identical(folder: str) -> None:
    payload = directory(FIX / folder)
    out = export(HERMES, adapt(HERMES, payload))
    assert out == {"files": {"MEMORY.md": payload["files"]["MEMORY.md"],
                             "USER.md": payload["files"]["USER.md"]}}


def test_hermes_at_budget_and_one_over() -> None:
    memory = read(FIX / "hermes-at-budget" / "MEMORY.md")
    user = read(FIX / "hermes-at-budget" / "USER.md")
    assert (len(memory), len(user)) == (2200, 1375)  # characters, delimiters included
    entries = adapt(HERMES, directory(FIX / "hermes-at-budget"))
    assert export(HERMES, entries)["files"]["MEMORY.md"] == memory
    for track, name, limit, key in (("agent", "MEMORY.md", 2200, "memory.memory_char_limit"),
                                    ("user", "USER.md", 1375, "memory.user_char_limit")):
        grown = [dict(e) for e in entries]
        last = max(i for i, e in enumerate(grown) if e["track"] == track)
        grown[last]["text"] += "!"
        err = refused(HERMES, grown, exporting=True)
        assert err.message == (
            f'adapter "hermes-memory-md": {name} would be {limit + 1:,} characters '
            f"({sum(e['track'] == track for e in grown)} entries joined by \"\\n\u00a7\\n\"), "
            f"over Hermes' default {limit:,}-character budget by 1 (the one checked here, "
            f"whatever {key} says in Hermes' config.yaml): remove or consolidate "
            f"{track}-track entries, then export again; nothing was cut")
        assert err.details == {"adapterId": HERMES, "file": name, "size": limit + 1,
                               "limit": limit}


def test_hermes_budget_counts_characters_like_hermes() -> None:
    """Hermes is Python: an emoji is one character of its budget, not two."""
    emoji = "🙂" * 2200
    assert export(HERMES, [entry(emoji, "agent")])["files"]["MEMORY.md"] == emoji
    refused(HERMES, [entry(emoji + "🙂", "agent")], exporting=True)


def test_hermes_refuses_entries_it_would_split_or_drop() -> None:
    for i, text in enumerate(["a\n\u00a7\nb", "ends with\n\u00a7", "\u00a7\nstarts"]):
        err = refused(HERMES, [entry("fine"), entry(text, "agent")], exporting=True)
        assert err.details["item"] == 1, i
        assert "has a line holding only \u00a7" in err.message
        assert "MEMORY.md would split it" in err.message
    err = refused(HERMES, [entry(" \n\t ")], exporting=True)
    assert err.details["item"] == 0 and "only whitespace" in err.message
    err = refused(HERMES, [{"text": "x"}], exporting=True)
    assert "entry 0 is not an entry" in err.message
    # a lone § entry and § inside lines are fine
    out = export(HERMES, [entry("\u00a7"), entry("see \u00a7 3"), entry("x \u00a7\ny")])
    assert out["files"]["USER.md"] == "\u00a7\n\u00a7\nsee \u00a7 3\n\u00a7\nx \u00a7\ny"


def test_hermes_export_normalises_like_hermes_reads() -> None:
    """Hermes strips entries, reads with universal newlines and drops repeats; export
    writes what Hermes would read back, and only the files that have entries."""
    entries = [entry("  padded \n", "agent"), entry("crlf\r\nline", "agent"),
               entry("padded", "agent", "workspace")]
    assert export(HERMES, entries) == {"files": {"MEMORY.md": "padded\n\u00a7\ncrlf\nline"}}
    assert export(HERMES, []) == {"files": {}}


def test_hermes_reading_rules() -> None:
    text = "\n  first  \n\u00a7\n\n\u00a7\nsecond\r\n\u00a7\r\nfirst\n\u00a7\nthird\n"
    got = adapt(HERMES, text)
    assert [e["text"] for e in got] == ["first", "second", "third"]
    assert {e["track"] for e in got} == {"agent"}  # a bare text is read as MEMORY.md
    got = adapt(HERMES, {"text": "a\n\u00a7\nb", "file": "user.md"})
    assert {e["track"] for e in got} == {"user"}
    assert adapt(HERMES, {"text": "   \n"}) == []
    one = adapt(HERMES, "- a single note that mentions a list:\n  - x")
    assert [e["text"] for e in one] == ["- a single note that mentions a list:\n  - x"]


def test_hermes_directory_ignores_lock_and_backup_files() -> None:
    payload = directory(FIX / "hermes")
    payload["files"]["MEMORY.md.lock"] = ""
    payload["files"]["MEMORY.md.bak.1764467000"] = "old\n\u00a7\nstuff"
    assert adapt(HERMES, payload) == adapt(HERMES, directory(FIX / "hermes"))
    err = refused(HERMES, {"files": {"notes.md": "x"}})
    assert err.message == 'adapter "hermes-memory-md": the directory has neither MEMORY.md ' \
                          "nor USER.md"


def test_hermes_markdown_variant() -> None:
    got = adapt(HERMES, {"text": read(FIX / "hermes-markdown" / "MEMORY.md"),
                         "file": "MEMORY.md"})
    assert [(e["tags"], e["text"]) for e in got] == [
        (["Environment"], "macOS 15 on Apple silicon; Homebrew in /opt/homebrew"),
        (["Environment"], "Docker Desktop, user in the docker group: no sudo"),
        (["Environment"], "Postgres 16 in docker compose on port 5433\n"
                          "  (5432 is taken by the host's own Postgres)"),
        (["Conventions"], "Commits follow Conventional Commits; scopes are package names"),
        (["Conventions"], "Run the full check before pushing:\n  ```sh\n  make lint test\n  ```"),
        (["Conventions"], "代码注释用英文，提交说明也用英文"),
        (["Conventions"], "Service ports:\n| service | port |\n|---------|------|\n"
                          "| api     | 8080 |\n| web     | 5173 |"),
        (["Lessons 🧪"], "`go test ./...` needs TZ=UTC: two tests compare local dates"),
        (["Lessons 🧪"], "Never `git push --force` to main; use --force-with-lease on feature "
                        "branches"),
        (["Lessons 🧪"], "Flaky test runbook:\n\n```bash\ngo test -run TestLedger -count=50 "
                        "./ledger/...\n```"),
    ]
    assert {(e["track"], e["scope"], e["source"]) for e in got} == \
        {("agent", "user-global", HERMES)}
    # the reference's strict example reads the same, tags and all
    ref = adapt(HERMES, {"text": "## About the user\n- 喜欢简洁回答\n- 雷区：不要重构他的测试\n"
                                 "## Preferences\n- 用中文交流", "file": "USER.md"})
    assert [(e["track"], e["tags"], e["text"]) for e in ref] == [
        ("user", ["About the user"], "喜欢简洁回答"),
        ("user", ["About the user"], "雷区：不要重构他的测试"),
        ("user", ["Preferences"], "用中文交流")]
    # a bullets-only file with no heading is a list of memories too
    assert [e["text"] for e in adapt(HERMES, "- a\n- b\n* c")] == ["a", "b", "c"]


def test_hermes_markdown_errors_say_which_line() -> None:
    err = refused(HERMES, {"text": "## Tools\n- build:\n```sh\nmake\n", "file": "MEMORY.md"})
    assert err.message == ('adapter "hermes-memory-md": MEMORY.md line 3: the code fence ``` '
                           "opened here is never closed")
    assert (err.details["file"], err.details["line"]) == ("MEMORY.md", 3)
    long = "Things to remember about the deployment pipeline"
    err = refused(HERMES, f"## Ok\n- x\n\n## {long}\n- y")
    assert err.details["line"] == 4
    assert "MEMORY.md line 4: the heading" in err.message and "at most 32" in err.message
    err = refused(HERMES, 42)
    assert "payload must be markdown text" in err.message


# ================================================================ Claude Code


def test_claude_md_project_file() -> None:
    path = "/Users/me/code/api/CLAUDE.md"
    got = adapt(CLAUDE, {"text": read(FIX / "claude" / "CLAUDE.md"), "file": "CLAUDE.md",
                         "path": path})
    assert {(e["track"], e["scope"], e["workspaceKey"], e["source"]) for e in got} == \
        {("agent", "workspace", "/Users/me/code/api", CLAUDE)}
    assert [(e["tags"], e["text"]) for e in got] == [
        ([], "Payments API in Go. Read @docs/architecture.md before changing the ledger."),
        (["Commands"], "Build: `make build`"),
        (["Commands"], "Test everything: `make test` (needs Docker for the Postgres container)"),
        (["Commands"], "One package:\n  ```sh\n  go test ./ledger/... -run TestPost -v\n  ```"),
        (["Code style"], 'Errors wrap with `fmt.Errorf("...: %w", err)`; never discard them'),
        (["Code style"], "日志用结构化字段（slog），不要拼接字符串"),
        (["Code style"], "Tables in docs use this layout:\n\n| column | meaning |\n"
                         "|--------|---------|\n| id     | ULID    |"),
        (["Workflow"], "Keep pull requests small and focused.\n"
                       "Squash-merge only after CI is green ✅."),
        (["Workflow"], "Ask before touching `migrations/`: they are applied in production by a "
                       "separate job."),
    ]
    # the user-level file (~/.claude/CLAUDE.md) and bare text are the person's, everywhere
    for payload in ({"text": "- Prefers tabs", "file": "CLAUDE.md",
                     "path": "/Users/me/.claude/CLAUDE.md"}, "- Prefers tabs"):
        assert adapt(CLAUDE, payload) == [{"track": "user", "scope": "user-global",
                                           "text": "Prefers tabs", "source": CLAUDE,
                                           "tags": []}]


def test_claude_memory_directory() -> None:
    got = adapt(CLAUDE, directory(CLAUDE_DIR))
    assert {(e["scope"], e["workspaceKey"]) for e in got} == {("workspace", "/Users/me/code/api")}
    assert [(e["track"], e["tags"], e["text"]) for e in got] == [
        ("user", ["type:feedback", "name:feedback-db-tests"],
         "Integration tests must use a real Postgres, not mocks\n\n"
         "Integration tests must hit a real database.\n"
         "**Why:** mocked tests passed while a production migration failed.\n"
         "**How to apply:** use the docker compose Postgres on port 5433."),
        ("user", ["name:user-role"],  # older files: a top-level type
         "Staff engineer on the payments team; reads Chinese and English equally well.\n"
         "Prefers answers that lead with the conclusion."),
        ("agent", ["name:project-release-freeze"],  # type project: the agent default
         "Merge freeze on main until the 2026-12 audit: only fixes tagged #hotfix\n\n"
         "The release manager is @lin; ask before merging anything else."),
        ("agent", ["type:reference", "name:reference-grafana"],
         'API latency dashboards are in Grafana under "Payments / API"\n\n'
         "API latency dashboards: https://grafana.internal/d/payments-api "
         "(p50/p95/p99 per route) 📈"),
        ("agent", ["name:deploy-zh"],
         "部署前先跑冒烟测试：`make smoke ENV=staging`，失败就回滚。\n回滚命令：`make rollback`。"),
        # MEMORY.md lines that point at no file, then topic files without front-matter
        ("agent", [], "[Old notes](gone.md) — this file was deleted by hand"),
        ("agent", ["Flaky ledger test"],
         "TestLedgerPost fails about 1 in 50 runs: it races the outbox worker"),
        ("agent", ["Flaky ledger test"],
         "Reproduce with:\n  ```sh\n  go test ./ledger -run TestLedgerPost -count=50\n  ```"),
    ]
    # one memory file on its own, and an explicit workspace
    one = adapt(CLAUDE, {"text": read(CLAUDE_DIR / "user_role.md"), "file": "user_role.md",
                         "path": str(CLAUDE_DIR / "user_role.md")})
    assert [bare(e) for e in one] == [dict(bare(got[1]), source=CLAUDE)]
    # metadata: the file it came from; in the directory also its MEMORY.md line
    kept = one[0]["meta"]["x-claude-code-memory-md"]
    assert (kept["key"], kept["data"]["file"]) == ("user_role.md", "user_role.md")
    assert "line" not in kept["data"]
    assert got[1]["meta"]["x-claude-code-memory-md"]["data"]["line"] == \
        "- [User role](user_role.md) \u2014 staff engineer on payments, reads Chinese and English"
    mine = adapt(CLAUDE, {**directory(CLAUDE_DIR), "workspaceKey": "/srv/api"})
    assert {e["workspaceKey"] for e in mine} == {"/srv/api"}
    outside = adapt(CLAUDE, {"files": directory(CLAUDE_DIR)["files"]})
    assert {e["scope"] for e in outside} == {"user-global"}
    assert all("workspaceKey" not in e for e in outside)


def test_claude_project_names() -> None:
    from filemem.adapters import shipped_module

    shipped_module()  # filemem._adapters: installed, or this checkout's adapters/ folder
    from filemem._adapters.claude_code import (  # type: ignore[import-untyped]
        decode_project,
        project_of_path,
    )

    assert decode_project("-Users-me-code-api") == "/Users/me/code/api"
    assert decode_project("-home-lin--config") == "/home/lin/config"  # lossy, best effort
    assert decode_project("C--Users-me-api") == "c:\\users\\me\\api"
    assert decode_project("notes") is None
    assert project_of_path("/root/.claude/projects/-srv-app/memory") == "-srv-app"
    assert project_of_path("C:\\Users\\me\\.claude\\projects\\C--w\\memory\\") == "C--w"
    assert project_of_path("/tmp/memory") is None
    assert adapt(CLAUDE, {"files": {"a.md": "---\nname: a\n---\nx"},
                          "project": "-srv-app"})[0]["workspaceKey"] == "/srv/app"


def test_claude_export_is_a_directory_claude_code_reads() -> None:
    entries = adapt(CLAUDE, directory(CLAUDE_DIR))
    stamped = [dict(e, updatedAt=1764460800000 + i) for i, e in enumerate(entries)]
    files = export(CLAUDE, stamped)["files"]
    index = files.pop("MEMORY.md")
    lines = index.splitlines()
    assert len(lines) == len(files) == len(entries)
    yaml = YAML(typ="safe", pure=True)
    for line, (name, text) in zip(lines, files.items(), strict=True):
        assert line.startswith(f"- [{name[:-3]}]({name}) \u2014 ")
        assert text.startswith("---\n") and text.endswith("\n")
        head, body = text[4:].split("\n---\n", 1)
        meta = yaml.load(head)
        assert meta["name"] == name[:-3]
        assert meta["metadata"]["type"] in ("user", "feedback", "project", "reference")
        assert isinstance(meta["description"], str) and "\n" not in meta["description"]
        assert str(meta["modified"]).startswith("2025-11-30 00:00:00")
        assert body.strip()
    assert files["feedback-db-tests.md"] == (
        "---\nname: feedback-db-tests\ndescription: Integration tests must use a real "
        "Postgres, not mocks\nmetadata:\n  type: feedback\nmodified: 2025-11-30T00:00:00.000Z\n"
        "---\nIntegration tests must use a real Postgres, not mocks\n\nIntegration tests must "
        "hit a real database.\n**Why:** mocked tests passed while a production migration "
        "failed.\n**How to apply:** use the docker compose Postgres on port 5433.\n")
    assert "user-role.md" in files and "reference-grafana.md" in files
    # and it reads back as the same entries
    again = adapt(CLAUDE, {"files": {**files, "MEMORY.md": index}})
    assert [(e["track"], e["tags"], e["text"]) for e in again] == \
        [(e["track"], e["tags"], e["text"]) for e in entries]


def test_claude_export_names_and_tags() -> None:
    entries = [entry("Prefers tabs"), entry("Prefers tabs"),
               entry("Use pnpm", "agent", tags=["tooling", "type:reference"]),
               entry("喜欢中文", tags=["name:lang-pref"]),
               entry("Memory about MEMORY", tags=["name:MEMORY"]),
               entry("x", "agent", tags=["type:feedback"])]
    files = export(CLAUDE, entries)["files"]
    assert sorted(files) == ["MEMORY-2.md", "MEMORY.md", "lang-pref.md", "project-x.md",
                             "reference-use-pnpm.md", "user-prefers-tabs-2.md",
                             "user-prefers-tabs.md"]
    assert 'tags: [tooling, "type:reference"]' in files["reference-use-pnpm.md"]
    assert "tags" not in files["lang-pref.md"]  # the name tag is carried by the name
    # a type that does not match the track is kept as a tag, the file gets the track's type
    assert '  type: project\ntags: ["type:feedback"]' in files["project-x.md"]
    back = adapt(CLAUDE, {"files": files})
    assert [(e["track"], e["tags"], e["text"]) for e in back] == \
        [(e["track"], e["tags"], e["text"]) for e in entries]


def test_claude_index_limits_refuse_rather_than_cut() -> None:
    many = [entry(f"note {i}") for i in range(200)]
    assert len(export(CLAUDE, many)["files"]["MEMORY.md"].splitlines()) == 200
    err = refused(CLAUDE, [*many, entry("one more")], exporting=True)
    assert "would be 201 lines" in err.message and "nothing was cut" in err.message
    assert err.details["lines"] == 201
    wide = [entry(f"{i} " + "x" * 150) for i in range(160)]  # 160 lines, ~28 KB of index
    err = refused(CLAUDE, wide, exporting=True)
    assert "25,000 bytes" in err.message and err.details["size"] > 25_000


def test_claude_errors_say_where() -> None:
    err = refused(CLAUDE, {"files": {"a.md": "---\nname: [unclosed\n---\nbody"}})
    assert err.message.startswith('adapter "claude-code-memory-md": a.md line ')
    assert "front-matter is not valid YAML" in err.message
    assert err.details["file"] == "a.md" and err.details["line"] >= 2
    err = refused(CLAUDE, {"files": {"b.md": "---\nname: b\nbody without end"}})
    assert "b.md line 1: the front-matter is not closed" in err.message
    err = refused(CLAUDE, {"files": {"c.md": "---\nbase: &a [1]\nother: *a\n---\nx"}})
    assert "anchors or aliases" in err.message
    err = refused(CLAUDE, {"files": {"d.md": "---\ntags: [fine, 3]\n---\nx"}})
    assert "d.md: front-matter tags must be a list of strings" in err.message
    err = refused(CLAUDE, {"text": "## Commands\n```sh\nmake", "file": "CLAUDE.md"})
    assert "CLAUDE.md line 2: the code fence" in err.message
    refused(CLAUDE, {"files": "nope"})
    refused(CLAUDE, ["not", "markdown"])


# ================================================================ mem0


def test_mem0_shapes() -> None:
    results = [bare(e) for e in adapt(MEM0, json.loads(read(FIX / "mem0" / "results.json")))]
    assert results == [
        {"track": "user", "scope": "user-global", "source": MEM0,
         "text": "Prefers integration tests against a real Postgres",
         "tags": ["testing", "user:alex", "agent:coder"]},
        {"track": "user", "scope": "user-global", "source": MEM0,
         "text": "用户偏好中文回复，技术名词保留英文", "tags": ["preferences", "user:alex"]},
        {"track": "user", "scope": "user-global", "source": MEM0,
         "text": "Project deadlines:\n- API freeze 2026-12-01\n- launch 2026-12-15 🚀",
         "tags": ["user:alex"]},
    ]
    listed = adapt(MEM0, json.loads(read(FIX / "mem0" / "list.json")))
    assert [(e["text"], e["tags"]) for e in listed] == [
        ("Name is Alex", ["user:alex"]), ("Is allergic to peanuts 🥜", ["health", "food",
                                                                        "user:alex"])]
    pages = adapt(MEM0, json.loads(read(FIX / "mem0" / "paginated.json")))
    assert [(e["text"], e["tags"]) for e in pages] == [
        ("Works at a fintech startup in Berlin", ["professional_details", "user:alex"]),
        ("Plays the cello on weekends", ["hobbies", "personal_details", "user:alex"]),
        ("周末不看工作消息", ["misc", "agent:assistant"])]
    facts = adapt(MEM0, json.loads(read(FIX / "mem0" / "facts.json")))
    assert [(e["text"], e["tags"]) for e in facts] == [("用户偏好中文", ["pref"]),
                                                      ("项目使用 pnpm", ["user:u1"])]
    assert adapt(MEM0, []) == [] and adapt(MEM0, {"results": []}) == []


def test_mem0_refusals_name_the_item() -> None:
    err = refused(MEM0, json.loads(read(FIX / "mem0" / "transcript.json")))
    assert "is a chat transcript, not memories" in err.message
    err = refused(MEM0, json.loads(read(FIX / "mem0" / "messages-list.json")))
    assert err.message.startswith('adapter "mem0": item 0: is a chat message ({role, content})')
    assert err.details == {"adapterId": MEM0, "item": 0}
    err = refused(MEM0, {"results": [{"memory": "ok"}, {"memory": ""}]})
    assert err.message == ('adapter "mem0": results[1]: must be an object with a non-empty '
                           '"memory" string')
    assert err.details["item"] == 1
    err = refused(MEM0, {"facts": [{"memory": "ok"}, "text"]})
    assert err.message.startswith('adapter "mem0": facts[1]: is a plain string: this is '
                                  "mem0's extraction output, not its stored memories")
    for strings in (["a", "b"], {"facts": ["a", "b"]}):  # the extraction step's output, said so
        assert "mem0's extraction output" in refused(MEM0, strings).message
    err = refused(MEM0, {"text": '[{"memory": "m"}]', "file": "mem0.txt"})  # a .txt file
    assert "read as text" in err.message and "give the file a .json name" in err.message
    uid = "3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8"
    err = refused(MEM0, [{"memory": "m", "user_id": uid}])
    assert "item 0: user_id cannot be kept as a tag" in err.message
    assert "at most 32" in err.message
    err = refused(MEM0, [{"memory": "m", "categories": ["ok", "bad\ttab"]}])
    assert "item 0: categories cannot be kept as a tag" in err.message
    err = refused(MEM0, [{"memory": "m", "metadata": {"tags": [f"t{i}" for i in range(17)]}}])
    assert "17 tags" in err.message
    err = refused(MEM0, [{"memory": "m", "metadata": {"filemem": {"track": "robot"}}}])
    assert "item 0: metadata.filemem has track 'robot'" in err.message
    bad: Any
    for bad in ("just text", {"results": "x"}, {"memories": []}, 3, None):
        refused(MEM0, bad)


def test_mem0_export() -> None:
    entries = [entry("Prefers tabs", tags=["style", "user:alex"], id="e1",
                     createdAt=1764460800000, updatedAt=1764460800123, source="cli",
                     workspaceKey="", agentKey=""),
               entry("Runs Postgres on 5433 🐘", "agent", "workspace", ["agent:coder"],
                     workspaceKey="/code/api", agentKey="coder")]
    out = export(MEM0, entries)
    assert out == {"results": [
        {"id": "e1", "memory": "Prefers tabs",
         "hash": hashlib.md5(b"Prefers tabs").hexdigest(),
         "metadata": {"tags": ["style", "user:alex"],
                      "filemem": {"track": "user", "scope": "user-global", "workspaceKey": "",
                                  "agentKey": "", "source": "cli"}},
         "created_at": "2025-11-30T00:00:00.000Z", "updated_at": "2025-11-30T00:00:00.123Z",
         "user_id": "alex"},
        {"memory": "Runs Postgres on 5433 🐘",
         "hash": hashlib.md5("Runs Postgres on 5433 🐘".encode()).hexdigest(),
         "metadata": {"tags": ["agent:coder"],
                      "filemem": {"track": "agent", "scope": "workspace",
                                  "workspaceKey": "/code/api", "agentKey": "coder"}},
         "agent_id": "coder"},
    ]}
    back = [bare(e) for e in adapt(MEM0, out)]
    assert back == [
        {"track": "user", "scope": "user-global", "text": "Prefers tabs", "source": "cli",
         "tags": ["style", "user:alex"], "workspaceKey": "", "agentKey": ""},
        {"track": "agent", "scope": "workspace", "text": "Runs Postgres on 5433 🐘",
         "source": MEM0, "tags": ["agent:coder"], "workspaceKey": "/code/api",
         "agentKey": "coder"}]
    err = refused(MEM0, [{"text": "no layer"}], exporting=True)
    assert err.details["item"] == 0
