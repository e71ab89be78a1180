"""`filemem adapters`, `filemem import --adapter` and `filemem export --adapter`, run as a
user would: the real command in subprocesses, on real files copied from the fixtures."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_clean_repo, git, run_cli

FIX = Path(__file__).resolve().parent / "fixtures" / "adapters"
CLAUDE_PROJECT = "-Users-me-code-api"


def ok(*args: str, store: Path | None = None, input: str | None = None) -> str:
    out = run_cli(*args, store=store, input=input)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


def fails(code: int, *args: str, store: Path | None = None, input: str | None = None) -> str:
    out = run_cli(*args, store=store, input=input)
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    return out.stderr


def entries(store: Path) -> list[dict[str, Any]]:
    return json.loads(ok("list", "--json", store=store))  # type: ignore[no-any-return]


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    ok("init", str(path))
    return path


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIX / name, dest)
    return dest


# ---------------------------------------------------------------- listing


def test_adapters_command() -> None:
    out = ok("adapters")
    lines = out.splitlines()
    assert lines[0] == "Memory adapters (3):"
    assert lines[1].startswith("- claude-code-memory-md (Claude Code memory")
    assert lines[2] == ("  import: claude-code-memory-md, claude-code-memory-dir; "
                        "export: claude-code-memory-dir")
    assert lines[3].startswith("- hermes-memory-md (Hermes Agent memory (MEMORY.md / USER.md), "
                               "v1.0.0): ")
    assert lines[5].startswith("- mem0 (mem0 memories, v1.1.0): ")
    assert lines[6] == "  import: mem0-results, mem0-facts; export: mem0-results"
    assert "filemem import --adapter ID PATH" in lines[-1]
    doc = json.loads(ok("adapters", "--json"))
    assert doc["problems"] == []
    assert [(a["id"], a["origin"]) for a in doc["adapters"]] == [
        ("claude-code-memory-md", "filemem"), ("hermes-memory-md", "filemem"),
        ("mem0", "filemem")]
    assert set(doc["adapters"][0]) == {"id", "name", "description", "version", "importFormats",
                                       "exportFormat", "origin"}


# ---------------------------------------------------------------- Hermes


@pytest.mark.parametrize("folder", ["hermes", "hermes-at-budget"])
def test_hermes_home_round_trip(store: Path, tmp_path: Path, folder: str) -> None:
    """`filemem import --adapter hermes-memory-md ~/.hermes/memories/` takes both files in
    one approval and one commit; exporting gives the same bytes back."""
    home = copy(folder, tmp_path)
    (home / "MEMORY.md.lock").write_text("", encoding="utf-8")  # what Hermes leaves around
    n = commits(store)
    out = ok("import", "--adapter", "hermes-memory-md", str(home), "--yes", store=store)
    listed = entries(store)
    assert out == f"Imported {len(listed)} entries via adapter hermes-memory-md in one commit.\n"
    assert commits(store) == n + 1
    assert_clean_repo(store)
    assert {(e["track"], e["scope"], e["source"]) for e in listed} == {
        ("agent", "user-global", "hermes-memory-md"), ("user", "user-global", "hermes-memory-md")}
    before = head(store)
    out_dir = tmp_path / "back"
    done = run_cli("export", "--adapter", "hermes-memory-md", "--out", str(out_dir), store=store)
    assert done.returncode == 0, done.stderr
    assert "Wrote 2 files to" in done.stderr
    for name in ("MEMORY.md", "USER.md"):
        assert (out_dir / name).read_bytes() == (home / name).read_bytes()
        mode = stat.S_IMODE(os.stat(out_dir / name).st_mode)
        assert mode == 0o600, oct(mode)  # private, like the store it came from
    assert head(store) == before  # export is read-only
    assert_clean_repo(store)


def test_hermes_export_options_and_refusals(store: Path, tmp_path: Path) -> None:
    home = copy("hermes", tmp_path)
    ok("import", "--adapter", "hermes-memory-md", str(home), "--yes", store=store)
    # a directory format needs --out DIR
    err = fails(2, "export", "--adapter", "hermes-memory-md", store=store)
    assert "the hermes-memory-md export is a directory (MEMORY.md, USER.md): pass --out DIR" in err
    # existing files are only replaced with --force
    (home / "USER.md").write_text("changed by Hermes", encoding="utf-8")
    err = fails(1, "export", "--adapter", "hermes-memory-md", "--out", str(home), store=store)
    # (MEMORY.md would not change: only USER.md is named)
    assert "INVALID_INPUT" in err and "already has USER.md; pass --force" in err
    assert (home / "USER.md").read_text(encoding="utf-8") == "changed by Hermes"
    ok("export", "--adapter", "hermes-memory-md", "--out", str(home), "--force", store=store)
    assert (home / "USER.md").read_bytes() == (FIX / "hermes" / "USER.md").read_bytes()
    assert (home / "MEMORY.md.lock").exists() is False  # nothing else appears
    # one track only
    only = tmp_path / "only-user"
    ok("export", "--adapter", "hermes-memory-md", "--track", "user", "--out", str(only),
       store=store)
    assert sorted(p.name for p in only.iterdir()) == ["USER.md"]
    # a file as --out for a directory format
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    err = fails(1, "export", "--adapter", "hermes-memory-md", "--out", str(tmp_path / "afile"),
                store=store)
    assert "is a file" in err
    # over Hermes' budget: refused, nothing written
    ok("add", "--yes", "--track", "user", "--scope", "user-global", "x" * 1300, store=store)
    big = tmp_path / "big"
    err = fails(1, "export", "--adapter", "hermes-memory-md", "--out", str(big), store=store)
    assert "ADAPTER_PAYLOAD" in err and "USER.md would be" in err and "nothing was cut" in err
    assert not big.exists()


def test_hermes_single_file_and_refusals(store: Path, tmp_path: Path) -> None:
    user = tmp_path / "USER.md"
    shutil.copy(FIX / "hermes" / "USER.md", user)
    ok("import", "--adapter", "hermes-memory-md", str(user), "--yes", store=store)
    assert {e["track"] for e in entries(store)} == {"user"}
    n = commits(store)
    blank = tmp_path / "MEMORY.md"
    blank.write_text("\n\n", encoding="utf-8")
    err = fails(1, "import", "--adapter", "hermes-memory-md", str(blank), "--yes", store=store)
    assert "INVALID_INPUT" in err and "found no entries" in err
    bad = tmp_path / "notes" / "MEMORY.md"
    bad.parent.mkdir()
    bad.write_text("## Build\n- run:\n```sh\nmake\n", encoding="utf-8")
    err = fails(1, "import", "--adapter", "hermes-memory-md", str(bad), "--yes", store=store)
    assert err.strip() == ('filemem: ADAPTER_PAYLOAD: adapter "hermes-memory-md": MEMORY.md '
                           "line 3: the code fence ``` opened here is never closed")
    latin1 = tmp_path / "old" / "MEMORY.md"
    latin1.parent.mkdir()
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    err = fails(1, "import", "--adapter", "hermes-memory-md", str(latin1), "--yes", store=store)
    assert "is not UTF-8 text" in err
    assert commits(store) == n


# ---------------------------------------------------------------- Claude Code


def test_claude_memory_directory(store: Path, tmp_path: Path) -> None:
    memory = tmp_path / ".claude" / "projects" / CLAUDE_PROJECT / "memory"
    shutil.copytree(FIX / "claude" / "projects" / CLAUDE_PROJECT / "memory", memory)
    done = run_cli("import", "--adapter", "claude-code-memory-md", str(memory), "--yes",
                   store=store)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Imported 8 entries via adapter claude-code-memory-md in one commit.\n"
    # the project folder name decodes to a path that is not on this machine: say so
    assert "placed entries in workspace /Users/me/code/api, which is not a folder here" in \
        done.stderr
    listed = entries(store)
    assert {(e["scope"], e["workspaceKey"]) for e in listed} == \
        {("workspace", "/Users/me/code/api")}
    tags = {t for e in listed for t in e["tags"]}
    assert {"type:feedback", "type:reference", "name:user-role", "Flaky ledger test"} <= tags

    # --workspace puts them where they belong instead
    other = tmp_path / "store2"
    ok("init", str(other))
    api = tmp_path / "code" / "api"
    api.mkdir(parents=True)
    done = run_cli("import", "--adapter", "claude-code-memory-md", str(memory), "--workspace",
                   str(api), "--yes", store=other)
    assert done.returncode == 0 and "not a folder" not in done.stderr
    assert {e["workspaceKey"] for e in entries(other)} == {str(api)}

    # export gives the folder back as it came: every file under its own name, byte for byte
    out = tmp_path / "export1"
    ok("export", "--adapter", "claude-code-memory-md", "--scope", "workspace", "--out",
       str(out), store=store)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == \
        {p.name: p.read_bytes() for p in memory.iterdir()}
    # entries filemem made (no metadata) are written fresh, with an index line each
    ok("add", "--yes", "--track", "agent", "--scope", "workspace", "--workspace", str(api),
       "CI runs on Debian 12", store=other)
    ok("add", "--yes", "--track", "user", "--scope", "workspace", "--workspace", str(api),
       "Prefers tabs", store=other)
    fresh = tmp_path / "fresh"
    ok("export", "--adapter", "claude-code-memory-md", "--out", str(fresh), store=other)
    index = (fresh / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert index[:6] == (memory / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert index[6:] == ["- [project-ci-runs-on-debian-12](project-ci-runs-on-debian-12.md) "
                         "\u2014 CI runs on Debian 12",
                         "- [user-prefers-tabs](user-prefers-tabs.md) \u2014 Prefers tabs"]
    for line in index[6:]:
        target = line.split("](", 1)[1].split(")", 1)[0]
        text = (fresh / target).read_text(encoding="utf-8")
        assert text.startswith("---\nname: ") and "\nmetadata:\n  type: " in text
    # and what it wrote comes back the same through another store
    third = tmp_path / "store3"
    ok("init", str(third))
    ok("import", "--adapter", "claude-code-memory-md", str(fresh), "--yes", store=third)
    out2 = tmp_path / "export2"
    ok("export", "--adapter", "claude-code-memory-md", "--out", str(out2), store=third)
    assert {p.name: p.read_bytes() for p in out2.iterdir()} == \
        {p.name: p.read_bytes() for p in fresh.iterdir()}


def test_claude_md_of_a_project(store: Path, tmp_path: Path) -> None:
    project = tmp_path / "api"
    project.mkdir()
    shutil.copy(FIX / "claude" / "CLAUDE.md", project / "CLAUDE.md")
    ok("import", "--adapter", "claude-code-memory-md", str(project / "CLAUDE.md"), "--yes",
       store=store)
    listed = entries(store)
    assert len(listed) == 9
    assert {(e["track"], e["scope"], e["workspaceKey"]) for e in listed} == \
        {("agent", "workspace", str(project))}
    assert sum("```sh" in e["text"] for e in listed) == 1
    assert sum("| id     | ULID    |" in e["text"] for e in listed) == 1


# ---------------------------------------------------------------- mem0


def test_mem0_import_and_export(store: Path, tmp_path: Path) -> None:
    ok("import", "--adapter", "mem0", str(FIX / "mem0" / "results.json"), "--yes", store=store)
    listed = entries(store)
    assert sorted(e["text"] for e in listed)[0] == \
        "Prefers integration tests against a real Postgres"
    assert {tuple(e["tags"]) for e in listed} == {("testing", "user:alex", "agent:coder"),
                                                  ("preferences", "user:alex"), ("user:alex",)}
    # stdin works too
    ok("import", "--adapter", "mem0", "-", "--yes", store=store,
       input=(FIX / "mem0" / "facts.json").read_text(encoding="utf-8"))
    before = head(store)
    doc = json.loads(ok("export", "--adapter", "mem0", store=store))
    assert len(doc["results"]) == 5
    # the items mem0 exported come back as they were, key for key (their hashes too)
    given = json.loads((FIX / "mem0" / "results.json").read_text(encoding="utf-8"))
    assert doc["results"][:3] == given["results"]
    for item in doc["results"][3:]:  # facts: the fields a results item has are filled in
        assert item["hash"] == hashlib.md5(item["memory"].encode()).hexdigest()
        assert set(item) >= {"id", "memory", "hash", "created_at", "updated_at"}
    assert head(store) == before
    out = tmp_path / "mem0.json"
    ok("export", "--adapter", "mem0", "--out", str(out), store=store)
    assert json.loads(out.read_text(encoding="utf-8")) == doc
    err = fails(1, "export", "--adapter", "mem0", "--out", str(out), store=store)
    assert "already exists; pass --force" in err
    # what mem0 export wrote imports back as the same entries
    other = tmp_path / "other"
    ok("init", str(other))
    ok("import", "--adapter", "mem0", str(out), "--yes", store=other)
    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        return (e["text"], e["track"], e["scope"], tuple(e["tags"]), e["source"])

    assert sorted(map(key, entries(other))) == sorted(map(key, entries(store)))


def test_mem0_refusals_change_nothing(store: Path, tmp_path: Path) -> None:
    n = commits(store)
    err = fails(1, "import", "--adapter", "mem0", str(FIX / "mem0" / "transcript.json"),
                "--yes", store=store)
    assert "ADAPTER_PAYLOAD" in err and "chat transcript" in err
    err = fails(1, "import", "--adapter", "mem0", str(FIX / "mem0" / "messages-list.json"),
                "--yes", store=store)
    assert "item 0: is a chat message" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"results": [', encoding="utf-8")
    err = fails(1, "import", "--adapter", "mem0", str(broken), "--yes", store=store)
    assert "INVALID_INPUT" in err and "is not JSON" in err
    many = tmp_path / "many.json"
    many.write_text(json.dumps([{"memory": f"m{i}"} for i in range(1001)]), encoding="utf-8")
    err = fails(1, "import", "--adapter", "mem0", str(many), "--yes", store=store)
    assert "import: 1,001 entries, more than 1,000 per import; split it" in err
    assert commits(store) == n
    assert entries(store) == []


# ---------------------------------------------------------------- approval and budgets


def test_one_approval_and_budget_checked_before_asking(store: Path, tmp_path: Path) -> None:
    home = copy("hermes-at-budget", tmp_path)
    n = commits(store)
    # nobody to ask: the whole import is one pending approval, nothing written yet
    err = fails(3, "import", "--adapter", "hermes-memory-md", str(home), store=store)
    assert "WRITE_DENIED" in err and "pending" in err
    pending = json.loads(ok("pending", "--json", store=store))
    assert len(pending) == 1 and pending[0]["payload"]["count"] == 51
    assert entries(store) == []
    ok("approve", pending[0]["id"], store=store)
    assert len(entries(store)) == 51
    assert commits(store) == n + 2  # the pending row, then the one import commit
    # a second copy does not fit the budgets: refused before anyone is asked (without
    # --keep-duplicates the second import is nothing to do: every entry is in memory)
    assert "Nothing to import" in ok("import", "--adapter", "hermes-memory-md", str(home),
                                     store=store)
    err = fails(1, "import", "--adapter", "hermes-memory-md", str(home), "--keep-duplicates",
                store=store)
    assert "BUDGET_EXCEEDED" in err and "/user-global at " in err
    assert json.loads(ok("pending", "--json", store=store)) == []
    assert len(entries(store)) == 51
    assert_clean_repo(store)


# ---------------------------------------------------------------- ids, usage, plain envelope


def test_adapter_ids_and_usage_errors(store: Path, tmp_path: Path) -> None:
    err = fails(1, "import", "--adapter", "letta", str(FIX / "mem0" / "facts.json"), "--yes",
                store=store)
    assert err.strip() == ('filemem: ADAPTER_NOT_FOUND: no memory adapter registered with id '
                           '"letta"; check `filemem adapters` for the registered list')
    err = fails(1, "export", "--adapter", "letta", store=store)
    assert "ADAPTER_NOT_FOUND" in err
    for bad in ("Mem0", "mem_0", ""):
        err = fails(2, "export", "--adapter", bad, store=store)
        assert "adapter id missing or invalid" in err
    err = fails(2, "import", "--adapter", "mem0", str(tmp_path / "missing.json"), store=store)
    assert "does not exist" in err
    as_json = json.loads(run_cli("import", "--adapter", "letta", str(FIX / "mem0" /
                                                                     "facts.json"),
                                 "--json", store=store).stdout)
    assert as_json["error"]["code"] == "ADAPTER_NOT_FOUND"
    assert as_json["error"]["details"] == {"adapterId": "letta"}


def test_plain_envelope_keeps_working(store: Path, tmp_path: Path) -> None:
    """Without --adapter: the memory-export-v1 envelope, including one written by the
    reference implementation (no sessionId, empty keys)."""
    reference = {
        "plugin": "dsh-memento", "schema": "memory-export-v1",
        "exportedAt": "2026-11-01T10:00:00.000Z",
        "budgets": [{"track": t, "scope": s, "used": 0, "limit": 4000}
                    for t in ("user", "agent") for s in ("user-global", "workspace")],
        "entries": [{"id": "0f7c1b1e-4a5b-4c3d-9e8f-001122334455", "track": "user",
                     "scope": "user-global", "workspaceKey": "/Users/me/code/api",
                     "agentKey": "", "text": "用户偏好中文", "source": "dsh-memento",
                     "tags": ["pref"], "version": 3, "createdAt": 1761991200000,
                     "updatedAt": 1761991300000, "lastRecalled": None, "recallCount": 2}],
    }
    path = tmp_path / "memory-export.json"
    path.write_text(json.dumps(reference, ensure_ascii=False), encoding="utf-8")
    assert ok("import", str(path), "--yes", store=store) == "Imported 1 entry in one commit.\n"
    [e] = entries(store)
    assert (e["text"], e["tags"], e["version"]) == ("用户偏好中文", ["pref"], 1)
    doc = json.loads(ok("export", store=store))
    assert doc["schema"] == "memory-export-v1" and len(doc["entries"]) == 1
    err = fails(2, "import", str(tmp_path), store=store)
    assert "is a folder; plain import reads a memory-export-v1 file" in err
    err = fails(2, "export", "--track", "user", store=store)
    assert "--track, --scope and --force go with --adapter" in err
    err = fails(2, "export", "--out", str(tmp_path), store=store)
    assert "is a folder" in err
    ok("import", "-", "--yes", store=store, input=json.dumps(reference))
    assert len(entries(store)) == 2


def test_export_into_a_missing_folder_says_so(store: Path, tmp_path: Path) -> None:
    missing = tmp_path / "not-there" / "memory.json"
    out = run_cli("export", "--out", str(missing), store=store)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "does not exist; create it first" in out.stderr
    assert not missing.parent.exists()
