"""The owner's adapter imports skip what is already in memory (filemem.owner.imports):
importing the same memory twice adds nothing and says so; --keep-duplicates imports it
anyway; the protocol's own seed/import (the Provider, an envelope) write every entry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import assert_clean_repo, ctx, git, run_cli

FIX = Path(__file__).resolve().parent / "fixtures" / "adapters"
HERMES = "hermes-memory-md"


def ok(*args: str, store: Path) -> str:
    out = run_cli(*args, store=store)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


def texts(store: Path) -> list[str]:
    return [e["text"] for e in json.loads(ok("list", "--json", store=store))]


def commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    ok("init", str(path), store=path)
    return path


def test_importing_the_same_hermes_folder_twice_adds_nothing(store: Path,
                                                             tmp_path: Path) -> None:
    home = tmp_path / "memories"
    shutil.copytree(FIX / "hermes", home)
    first = ok("import", "--adapter", HERMES, str(home), "--yes", store=store)
    assert first.startswith("Imported ") and "Skipped" not in first
    listed = texts(store)
    n = commits(store)
    again = ok("import", "--adapter", HERMES, str(home), "--yes", store=store)
    assert again == (f"Nothing to import: {len(listed)} entries already in memory; nothing was "
                     "written (--keep-duplicates imports them anyway).\n")
    assert texts(store) == listed and commits(store) == n  # nothing asked, nothing committed
    # Hermes gained one entry meanwhile: only that one comes in
    memory = home / "MEMORY.md"
    memory.write_text(memory.read_text(encoding="utf-8") + "\n§\nA new fact", encoding="utf-8")
    out = ok("import", "--adapter", HERMES, str(home), "--yes", store=store)
    assert out == (f"Imported 1 entry via adapter {HERMES} in one commit.\n"
                   f"Skipped {len(listed)} entries already in memory (--keep-duplicates "
                   "imports them too).\n")
    assert texts(store) == [*listed, "A new fact"] and commits(store) == n + 1
    # --json says which were skipped and why
    doc = json.loads(ok("import", "--adapter", HERMES, str(home), "--yes", "--json",
                        store=store))
    assert (doc["added"], doc["entries"]) == (0, [])
    assert len(doc["skipped"]) == len(listed) + 1
    assert set(doc["skipped"][0]) == {"index", "track", "scope", "workspaceKey", "agentKey",
                                      "text", "why"}
    assert {s["why"] for s in doc["skipped"]} == {"in-memory"}
    # --keep-duplicates: everything again
    ok("import", "--adapter", HERMES, str(home), "--yes", "--keep-duplicates", store=store)
    assert len(texts(store)) == 2 * (len(listed) + 1)
    assert_clean_repo(store)


def test_a_text_repeated_in_one_import_is_taken_once(store: Path, tmp_path: Path) -> None:
    facts = tmp_path / "mem0.json"
    facts.write_text(json.dumps([{"memory": "likes go"}, {"memory": "likes rust"},
                                 {"memory": "likes go"}]), encoding="utf-8")
    out = ok("import", "--adapter", "mem0", str(facts), "--yes", store=store)
    assert out == ("Imported 2 entries via adapter mem0 in one commit.\n"
                   "Skipped 1 entry repeated in the import (--keep-duplicates imports them "
                   "too).\n")
    assert texts(store) == ["likes go", "likes rust"]
    doc = json.loads(ok("import", "--adapter", "mem0", str(facts), "--yes", "--json",
                        "--keep-duplicates", store=store))
    assert doc["added"] == 3 and doc["skipped"] == []


def test_the_same_text_in_another_layer_is_not_a_duplicate(store: Path, tmp_path: Path) -> None:
    notes = tmp_path / "CLAUDE.md"
    notes.write_text("- Run the tests with make test\n", encoding="utf-8")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for workspace in (a, b):  # another workspace: another layer
        out = ok("import", "--adapter", "claude-code-memory-md", str(notes), "--workspace",
                 workspace, "--yes", store=store)
        assert out.startswith("Imported 1 entry"), out
    out = ok("import", "--adapter", "claude-code-memory-md", str(notes), "--workspace", a,
             "--agent", "coder", "--yes", store=store)  # another agent's layer
    assert out.startswith("Imported 1 entry"), out
    assert "Nothing to import" in ok("import", "--adapter", "claude-code-memory-md",
                                     str(notes), "--workspace", b, "--yes", store=store)
    # the same words with different spacing are another text
    notes.write_text("- Run the tests with  make test\n", encoding="utf-8")
    assert ok("import", "--adapter", "claude-code-memory-md", str(notes), "--workspace", a,
              "--yes", store=store).startswith("Imported 1 entry")
    assert len(texts(store)) == 4


def test_the_protocols_own_imports_keep_every_entry(store: Path, tmp_path: Path) -> None:
    ok("add", "--yes", "--scope", "user-global", "Prefers tea", store=store)
    backup = tmp_path / "backup.json"
    ok("export", "--out", str(backup), store=store)
    assert ok("import", str(backup), "--yes", store=store) == "Imported 1 entry in one commit.\n"
    assert texts(store) == ["Prefers tea", "Prefers tea"]
    out = run_cli("import", str(backup), "--yes", "--keep-duplicates", store=store)
    assert out.returncode == 2 and "--keep-duplicates goes with --adapter" in out.stderr
    with filemem.open_store(store, write_policy="auto") as p:
        p.seed([{"track": "user", "scope": "user-global", "text": "Prefers tea"}], ctx())
        p.import_entries([{"track": "user", "scope": "user-global", "text": "Prefers tea"}],
                         ctx())
    assert texts(store).count("Prefers tea") == 4


def test_the_owner_api(store: Path) -> None:
    entry = {"track": "agent", "scope": "workspace", "text": "Uses sqlc"}
    with filemem.open_owner(store) as owner:
        owner.provider.gate = lambda request: "allowed-once"
        first = owner.import_entries([entry, dict(entry)], ctx(cwd="/w/api"))
        assert first["added"] == 1
        assert [(s["index"], s["why"], s["workspaceKey"]) for s in first["skipped"]] == \
            [(1, "repeated", "/w/api")]
        again = owner.import_entries([entry], ctx(cwd="/w/api"))
        assert again == {"added": 0, "entries": [], "skipped": [
            {"index": 0, "track": "agent", "scope": "workspace", "workspaceKey": "/w/api",
             "agentKey": "", "text": "Uses sqlc", "why": "in-memory"}]}
        elsewhere = owner.import_entries([entry], ctx(cwd="/w/web"))
        assert elsewhere["added"] == 1 and elsewhere["skipped"] == []
        # what the import refuses is still refused, with the protocol's error
        bad: list[Any] = [entry, {"track": "robot", "scope": "workspace", "text": "x"}]
        with pytest.raises(filemem.ProtocolError) as info:
            owner.import_entries(bad, ctx(cwd="/w/new"))
        assert info.value.code == "INVALID_INPUT"
        with pytest.raises(filemem.ProtocolError) as info:
            owner.import_entries([entry], None)
        assert info.value.code == "WRITE_REQUIRES_AGENT"


def test_an_import_waiting_as_a_pending_approval_is_not_staged_again(store: Path,
                                                                     tmp_path: Path) -> None:
    """Without a terminal an import waits as a pending approval; running it again leaves out
    what that approval would add, so approving it gives each entry once."""
    home = tmp_path / "memories"
    shutil.copytree(FIX / "hermes", home)
    first = run_cli("import", "--adapter", HERMES, str(home), store=store)  # stdin: no tty
    assert first.returncode != 0 and "staged as pending approval" in first.stderr
    pending = json.loads(ok("pending", "--json", store=store))
    assert len(pending) == 1
    pid = pending[0]["id"]
    again = ok("import", "--adapter", HERMES, str(home), store=store)
    n = len(pending[0]["arg"])
    assert again == (f"Nothing to import: {n} entries waiting in pending approval {pid} (see "
                     f"it with `filemem pending --store {store}`, import it with `filemem "
                     f"approve {pid} --store {store}`); nothing was written "
                     "(--keep-duplicates imports them anyway).\n")
    doc = json.loads(ok("import", "--adapter", HERMES, str(home), "--json", store=store))
    assert {(s["why"], s["pendingId"]) for s in doc["skipped"]} == {("pending", pid)}
    assert len(json.loads(ok("pending", "--json", store=store))) == 1
    # the same text in another layer is not waiting there
    other = run_cli("import", "--adapter", HERMES, str(home), "--agent", "coder", store=store)
    assert "staged as pending approval" in other.stderr
    assert len(json.loads(ok("pending", "--json", store=store))) == 2
    ok("approve", pid, store=store)
    listed = texts(store)
    assert len(listed) == n == len(set(listed))
    assert "Nothing to import" in ok("import", "--adapter", HERMES, str(home), store=store)
