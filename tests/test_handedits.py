"""Hand edits as the owner makes them: `filemem status`, `filemem adopt`, `filemem discard`.

Real files edited in a real store, the real CLI in subprocesses (and at a pseudo-terminal
for the prompts), and git's own CLI to check what a person would see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files.layout import key_dir
from filemem.shown import counted
from tests.conftest import (
    assert_clean_repo,
    ctx,
    entry_fields,
    entry_file_text,
    file_of,
    git,
    rel,
    run_at_terminal,
    set_text,
)

UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
ENTRY_FIELDS = {"id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
                "version", "createdAt", "updatedAt", "lastRecalled", "recallCount",
                "sessionId"}
OUTCOME = "adopted (the owner's file edit, via filemem adopt)"
SHARED_UG = "user/user-global/_shared"
MakeProvider = Callable[..., filemem.Provider]


# ---------------------------------------------------------------- helpers


def fm(*args: str, store: Path, cwd: Path | None = None,
       input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real `filemem` command on ``store``, run from ``cwd``."""
    return subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                          capture_output=True, text=True, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          cwd=str(cwd or store.parent),
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def ok(*args: str, store: Path, cwd: Path | None = None) -> str:
    out = fm(*args, store=store, cwd=cwd)
    assert out.returncode == 0, (args, out.returncode, out.stdout, out.stderr)
    return out.stdout


def status_json(store: Path) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = json.loads(ok("status", "--json", store=store))
    return changes


def by_path(store: Path) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for c in status_json(store)}


def put(path: Path, text: str) -> Path:
    """Write a file as a person would, making its folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


def trailers(store: Path, key: str, rev: str = "HEAD") -> list[str]:
    out = git(store, "log", "-1", f"--format=%(trailers:key={key},valueonly)", rev)
    return [line for line in out.split("\n") if line]


def texts(p: filemem.Provider) -> list[str]:
    return sorted(e["text"] for e in p.list_entries())


def set_budget(store: Path, limit: int) -> None:
    """Lower user/user-global's budget in filemem.yaml and adopt that edit."""
    cfg = store / "filemem.yaml"
    text = cfg.read_text(encoding="utf-8")
    assert "userGlobal: 2000" in text
    cfg.write_text(text.replace("userGlobal: 2000", f"userGlobal: {limit}", 1), encoding="utf-8")
    ok("adopt", "--yes", "filemem.yaml", store=store)


@pytest.fixture
def p(make_provider: MakeProvider) -> filemem.Provider:
    return make_provider()


def add(p: filemem.Provider, text: str, layer: dict[str, str] | None = None,
        agent: str | None = None, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = p.add({**(layer or UG), "text": text, **extra},
                                  ctx(agent=agent))["entry"]
    return entry


# ---------------------------------------------------------------- status


def test_status_of_a_clean_store_shows_nothing(p: filemem.Provider, store_path: Path) -> None:
    add(p, "likes tea")
    assert status_json(store_path) == []
    out = ok("status", store=store_path)
    assert out.strip() == "Nothing to adopt: the working tree matches the memory agents see."
    assert_clean_repo(store_path)


def test_status_lists_edited_added_deleted_and_store_files(p: filemem.Provider,
                                                           store_path: Path) -> None:
    tea = add(p, "likes tea", tags=["drinks"])
    cake = add(p, "likes cake")
    keep = add(p, "runs make test", AW)
    before_head = head(store_path)
    set_text(file_of(store_path, tea["id"]), "likes green tea")
    file_of(store_path, cake["id"]).unlink()
    put(store_path / SHARED_UG / "my note.md", "I write in vim\n")
    with open(store_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\nMy own notes about this store.\n")
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("language: en", "language: zh"),
                   encoding="utf-8")

    changes = status_json(store_path)
    tea_path = rel(store_path, file_of(store_path, tea["id"]))
    cake_path = f"{SHARED_UG}/{cake['id']}.md"
    new_path = f"{SHARED_UG}/my note.md"
    # entry files in path order, then the store's own files
    assert sorted((c["path"], c["kind"], c["adoptable"]) for c in changes[:3]) == sorted([
        (cake_path, "deleted", True), (new_path, "added", True), (tea_path, "edited", True)])
    assert [(c["path"], c["kind"], c["adoptable"]) for c in changes[3:]] == [
        ("filemem.yaml", "edited", True), ("README.md", "edited", True)]
    got = {c["path"]: c for c in changes}
    # edited: what adopting would commit (same entry, next version, the new text)
    edited = got[tea_path]
    assert edited["id"] == tea["id"] and set(edited["entry"]) == ENTRY_FIELDS
    assert (edited["entry"]["text"], edited["entry"]["version"], edited["entry"]["tags"]) == \
        ("likes green tea", 2, ["drinks"])
    assert "problem" not in edited and "moveTo" not in edited
    # deleted: the entry it was
    assert got[cake_path]["id"] == cake["id"] and "entry" not in got[cake_path]
    # added from scratch: gets an id and front-matter, and a file named after the id
    added = got[new_path]
    assert added["entry"]["text"] == "I write in vim"  # the final newline is the file's
    assert added["entry"]["source"] == "hand-edit" and added["entry"]["version"] == 1
    assert added["moveTo"] == f"{SHARED_UG}/{added['entry']['id']}.md"
    # store files: no entry, no id
    assert set(got["README.md"]) == {"path", "kind", "adoptable"}
    assert set(got["filemem.yaml"]) == {"path", "kind", "adoptable"}

    human = ok("status", store=store_path)
    assert f"  M {tea_path}  likes green tea" in human
    assert f"  D {cake_path}  likes cake" in human
    assert f"  A {new_path} (gets an id and front-matter when adopted)" in human
    assert "  M README.md" in human and "  M filemem.yaml" in human
    assert "cannot adopt" not in human
    assert f"{keep['id']}" not in human
    # status reads; it changes nothing
    assert head(store_path) == before_head
    porcelain = git(store_path, "status", "--porcelain")
    assert f" M {tea_path}" in porcelain and f" D {cake_path}" in porcelain
    assert "?? user/user-global/_shared/" in porcelain or '?? "user/user-global/_shared/my note' \
        in porcelain


def test_hand_edits_are_invisible_to_agents_until_adopted(p: filemem.Provider,
                                                         make_provider: MakeProvider,
                                                         store_path: Path) -> None:
    tea = add(p, "likes tea")
    cake = add(p, "likes cake")
    session = {"id": "snap-1", "header": {"cwd": "/work/proj"}}
    budgets = p.budgets()
    snapshot = p.snapshot(session)
    set_text(file_of(store_path, tea["id"]), "likes green tea")
    file_of(store_path, cake["id"]).unlink()
    put(store_path / SHARED_UG / "new.md", "likes biscuits")

    def seen(q: filemem.Provider) -> tuple[Any, ...]:
        found = [e["text"] for e in q.query({"text": "likes"})["entries"]]
        return (sorted(found), texts(q), q.budgets(),
                q.snapshot({"id": f"s-{time.monotonic_ns()}", "header": {"cwd": "/work/proj"}}))

    for q in (p, make_provider()):  # one opened before the edits, one after
        got = seen(q)
        assert got[0] == got[1] == ["likes cake", "likes tea"]
        assert got[2] == budgets
        assert got[3] == snapshot and "green" not in got[3] and "biscuits" not in got[3]
    cli = json.loads(ok("list", "--json", store=store_path))
    assert sorted(e["text"] for e in cli) == ["likes cake", "likes tea"]
    assert json.loads(ok("query", "green", "--json", store=store_path))["total"] == 0

    ok("adopt", "--yes", store=store_path)
    assert texts(p) == ["likes biscuits", "likes green tea"]
    assert p.query({"text": "green"})["total"] == 1
    assert "likes green tea" in p.snapshot({"id": "snap-2", "header": {"cwd": "/work/proj"}})
    assert p.budgets()[0]["used"] == len("likes biscuits") + len("likes green tea")


# One case per reason a file cannot be adopted: (setup, path to look at, words of the reason).
Setup = Callable[[filemem.Provider, Path], str]


def _new_file(name: str, content: str) -> Setup:
    def setup(p: filemem.Provider, store: Path) -> str:
        add(p, "an entry already there")
        path = store / SHARED_UG / name
        path.write_text(content, encoding="utf-8")
        return rel(store, path)
    return setup


def _edit_front_matter(old: str, new: str) -> Setup:
    def setup(p: filemem.Provider, store: Path) -> str:
        e = add(p, "likes tea")
        path = file_of(store, e["id"])
        data = path.read_text(encoding="utf-8")
        assert old in data
        path.write_text(data.replace(old, new, 1), encoding="utf-8")
        return rel(store, path)
    return setup


def _change_id(p: filemem.Provider, store: Path) -> str:
    e = add(p, "likes tea")
    path = file_of(store, e["id"])
    path.write_text(path.read_text(encoding="utf-8").replace(e["id"], str(uuid.uuid4())),
                    encoding="utf-8")
    return rel(store, path)


def _wrong_name(p: filemem.Provider, store: Path) -> str:
    name = f"{uuid.uuid4()}.md"
    path = store / SHARED_UG
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(entry_file_text(entry_fields(), "named after another id"),
                             encoding="utf-8")
    return f"{SHARED_UG}/{name}"


def _duplicate_id(p: filemem.Provider, store: Path) -> str:
    e = add(p, "likes tea")
    put(store / SHARED_UG / "copy.md", entry_file_text({"id": e["id"]}, "a copy"))
    return f"{SHARED_UG}/copy.md"


def _unknown_agent_folder(p: filemem.Provider, store: Path) -> str:
    add(p, "likes tea")
    folder = store / "user" / "user-global" / "someone-0123456789"
    folder.mkdir(parents=True)
    (folder / "n.md").write_text("whose is this?", encoding="utf-8")
    return "user/user-global/someone-0123456789/n.md"


def _not_in_a_layer(p: filemem.Provider, store: Path) -> str:
    add(p, "likes tea")
    (store / "user" / "loose.md").write_text("not in a layer folder", encoding="utf-8")
    return "user/loose.md"


def _over_budget(p: filemem.Provider, store: Path) -> str:
    set_budget(store, 40)
    add(p, "x" * 30)
    put(store / SHARED_UG / "long.md", "y" * 11)
    return f"{SHARED_UG}/long.md"


def _bad_config(p: filemem.Provider, store: Path) -> str:
    cfg = store / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8") + "\nbudgets: [unclosed\n", encoding="utf-8")
    return "filemem.yaml"


def _config_deleted(p: filemem.Provider, store: Path) -> str:
    (store / "filemem.yaml").unlink()
    return "filemem.yaml"


REASONS: dict[str, tuple[Setup, str]] = {
    "bad YAML": (_new_file("bad.md", "---\ntags: [a, b\n---\ntext"), "not valid YAML"),
    "YAML alias": (_new_file("alias.md", "---\ntags: &t [a]\nsource: *t\n---\ntext"),
                   "anchors"),
    "unclosed front-matter": (_new_file("open.md", "---\ntags: [a]\ntext"), "not closed"),
    "empty text": (_new_file("empty.md", "---\ntags: [a]\n---\n"), "empty"),
    "unknown track": (_edit_front_matter("track: user", "track: robot"),
                      "track must be one of user|agent"),
    "unknown scope": (_edit_front_matter("scope: user-global", "scope: planet"),
                      "scope must be one of"),
    "tag too long": (_edit_front_matter("tags: []", f"tags: [{'t' * 33}]"), "exceeds 32 chars"),
    "source not a string": (_edit_front_matter("source: filemem", "source: 12"),
                            "source must be a non-empty string"),
    "duplicate key": (_edit_front_matter("tags: []", "tags: []\nversion: two"), "duplicate"),
    "id changed": (_change_id, "the id was changed"),
    "moves to another layer": (_edit_front_matter('agentKey: ""', "agentKey: coder"),
                               "the front-matter says the entry belongs in"),
    "moves to another track": (_edit_front_matter("track: user", "track: agent"),
                               "the front-matter says the entry belongs in"),
    "id/path mismatch": (_wrong_name, "the file name says id"),
    "id already used": (_duplicate_id, "is already used by another entry"),
    "unknown agent folder": (_unknown_agent_folder, "cannot tell the agentKey"),
    "not in a layer folder": (_not_in_a_layer, "is not under <track>/<scope>/"),
    "not .md": (_new_file("notes.txt", "plain text"), "not an entry file"),
    "over budget": (_over_budget, "over budget"),
    "bad filemem.yaml": (_bad_config, "YAML"),
    "filemem.yaml deleted": (_config_deleted, "cannot be deleted"),
}


@pytest.mark.parametrize("case", list(REASONS))
def test_status_gives_the_reason_and_adopt_refuses(case: str, p: filemem.Provider,
                                                    store_path: Path) -> None:
    setup, words = REASONS[case]
    path = setup(p, store_path)
    listed = by_path(store_path)[path]
    assert listed["adoptable"] is False
    assert ("entry" in listed) == (case == "over budget")  # a valid entry that does not fit
    assert words in listed["problem"], listed["problem"]
    human = ok("status", store=store_path)
    assert f"{path}" in human and f"cannot adopt: {listed['problem']}" in human
    on_disk = (store_path / path).read_bytes() if (store_path / path).exists() else None
    before, entries = head(store_path), texts(p)
    # everything, or just that file (alternately, to keep the run short)
    args = ("adopt", "--yes") if list(REASONS).index(case) % 2 else ("adopt", "--yes", path)
    out = fm(*args, store=store_path)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"filemem: cannot adopt {path}: {listed['problem']}" in out.stderr
    assert "Adopted" not in out.stdout
    assert head(store_path) == before and texts(p) == entries  # nothing committed
    after = (store_path / path).read_bytes() if (store_path / path).exists() else None
    assert after == on_disk  # the person's file is left as it was
    git(store_path, "fsck", "--strict")


def test_an_invalid_file_blocks_the_whole_adopt(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    set_text(file_of(store_path, tea["id"]), "likes green tea")
    put(store_path / SHARED_UG / "bad.md", "---\ntags: [\n---\nx")
    before = head(store_path)
    out = fm("adopt", "--yes", store=store_path)
    assert out.returncode == 1 and "cannot adopt user/user-global/_shared/bad.md" in out.stderr
    assert head(store_path) == before and texts(p) == ["likes tea"]
    # the good edit alone can be adopted
    ok("adopt", "--yes", rel(store_path, file_of(store_path, tea["id"])), store=store_path)
    assert texts(p) == ["likes green tea"]
    assert [c["path"] for c in status_json(store_path)] == [f"{SHARED_UG}/bad.md"]


# ---------------------------------------------------------------- adopt: asking


def test_adopt_without_a_terminal_or_yes_adopts_nothing(p: filemem.Provider,
                                                         store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    set_text(path, "likes green tea")
    before = head(store_path)
    out = fm("adopt", store=store_path)  # stdin is /dev/null
    assert out.returncode == 3
    assert "no terminal to ask; pass --yes" in out.stderr and "Nothing adopted." in out.stderr
    as_json = fm("adopt", "--json", store=store_path)  # the refusal on stdout too
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["error"]["code"] == "WRITE_DENIED"
    # the diff was shown first
    assert f"+++ b/{rel(store_path, path)}" in out.stderr
    assert "-likes tea" in out.stderr and "+likes green tea" in out.stderr
    assert head(store_path) == before and texts(p) == ["likes tea"]
    assert path.read_text(encoding="utf-8").endswith("likes green tea")
    assert [c["kind"] for c in status_json(store_path)] == ["edited"]


@pytest.mark.parametrize("answer", [b"\n", b"n\n"], ids=["enter", "n"])
def test_adopt_at_a_terminal_defaults_to_no(answer: bytes, p: filemem.Provider,
                                            store_path: Path) -> None:
    tea = add(p, "likes tea")
    set_text(file_of(store_path, tea["id"]), "likes green tea")
    before = head(store_path)
    code, screen = run_at_terminal(["adopt", "--store", str(store_path)], answer,
                               b"Adopt 1 change?")
    assert code == 3, screen
    assert "[y/N]" in screen and "Nothing adopted." in screen
    asked = screen.split("Adopt 1 change?")[0]
    assert "-likes tea" in asked and "+likes green tea" in asked
    assert head(store_path) == before and texts(p) == ["likes tea"]


def test_adopt_at_a_terminal_answered_yes(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    set_text(file_of(store_path, tea["id"]), "likes green tea")
    n = commits(store_path)
    code, screen = run_at_terminal(["adopt", "--store", str(store_path)], b"y\n",
                               b"Adopt 1 change?")
    assert code == 0, screen
    assert "Adopted 1 change in one commit." in screen
    assert commits(store_path) == n + 1 and texts(p) == ["likes green tea"]
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- adopt: the commit


def test_adopt_commits_once_with_an_edit_row_per_file(p: filemem.Provider,
                                                      store_path: Path) -> None:
    tea = add(p, "likes tea", tags=["drinks"])
    cake = add(p, "likes cake")
    code = add(p, "runs make test", AW, agent="coder")
    tea_file, cake_file = file_of(store_path, tea["id"]), file_of(store_path, cake["id"])
    code_file = file_of(store_path, code["id"])
    set_text(tea_file, "likes green tea")
    set_text(code_file, "runs make check")
    cake_file.unlink()
    put(store_path / SHARED_UG / "vim.md", "I write in vim")
    with open(store_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\nmine\n")
    n = commits(store_path)
    started = int(time.time() * 1000)

    out = json.loads(ok("adopt", "--yes", "--json", store=store_path))
    assert commits(store_path) == n + 1
    assert sorted(c["kind"] for c in out) == ["added", "deleted", "edited", "edited", "edited"]
    # the commit as git shows it
    subject = git(store_path, "log", "-1", "--format=%s")
    assert subject.strip() == "edit: adopt 5 hand edits"
    assert trailers(store_path, "Audit-Action") == ["edit"] * 5
    outcomes = trailers(store_path, "Audit-Outcome")
    assert all(o.startswith(OUTCOME) for o in outcomes)
    assert sorted(o.removeprefix(OUTCOME) for o in outcomes) == \
        ["", ": added", ": deleted", ": edited", ": edited"]
    entries_in_rows = trailers(store_path, "Audit-Entry")
    assert tea["id"] in entries_in_rows and cake["id"] in entries_in_rows
    assert code["id"] in entries_in_rows and len(entries_in_rows) == 4
    changed = set(git(store_path, "show", "--name-only", "--format=", "HEAD").split("\n")) - {""}
    assert {rel(store_path, tea_file), rel(store_path, cake_file), rel(store_path, code_file),
            "README.md"} <= changed and len(changed) == 5
    # the same rows through the protocol's audit list
    rows = [r for r in p.audit_list(5) if r["action"] == "edit"]
    assert len(rows) == 5
    by_entry = {r["entryId"]: r for r in rows}
    assert by_entry[tea["id"]]["text"] == "likes green tea"
    assert by_entry[cake["id"]]["text"] == "likes cake"
    assert by_entry[None]["text"] == "edited README.md"
    # versions bumped, updatedAt set, everything else kept
    now = {e["id"]: e for e in p.list_entries()}
    assert cake["id"] not in now
    for before, text in ((tea, "likes green tea"), (code, "runs make check")):
        after = now[before["id"]]
        assert after["text"] == text and after["version"] == before["version"] + 1
        assert after["createdAt"] == before["createdAt"]
        assert started <= after["updatedAt"] <= int(time.time() * 1000) + 1000
        assert after["updatedAt"] > before["updatedAt"]
        for key in ("tags", "source", "sessionId", "workspaceKey", "agentKey", "track", "scope"):
            assert after[key] == before[key]
    vim = [e for e in now.values() if e["text"] == "I write in vim"]
    assert len(vim) == 1 and vim[0]["version"] == 1
    assert "updatedAt: " in tea_file.read_text(encoding="utf-8")
    assert f"version: {tea['version'] + 1}\n" in tea_file.read_text(encoding="utf-8")
    assert_clean_repo(store_path)
    assert status_json(store_path) == []


def test_adopt_keeps_keys_and_comments_someone_added(p: filemem.Provider,
                                                     store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    data = path.read_text(encoding="utf-8")
    head_part, _ = data.split("\n---\n", 1)
    claude = ("name: user-preferences\n"
              "description: \"What the user likes to drink\"\n"
              "metadata:\n  type: user\n  origin: claude-code\n"
              "# a note of my own, keep it\n")
    path.write_text(head_part + "\n" + claude + "---\nlikes green tea\n", encoding="utf-8")
    ok("adopt", "--yes", store=store_path)
    after = path.read_text(encoding="utf-8")
    for line in claude.splitlines():
        assert line in after.split("\n"), (line, after)
    assert after.endswith("---\nlikes green tea\n")
    assert "version: 2\n" in after and "version: 1\n" not in after
    assert texts(p) == ["likes green tea"]  # the final newline is the file's
    assert git(store_path, "show", f"HEAD:{rel(store_path, path)}") == after
    # and a later agent replace keeps them too
    p.replace({**UG, "match": "green", "text": "likes black tea"}, ctx())
    later = path.read_text(encoding="utf-8")
    assert all(line in later.split("\n") for line in claude.splitlines())
    assert "version: 3\n" in later
    assert_clean_repo(store_path)


def test_a_file_written_from_scratch_gets_an_id_and_front_matter(p: filemem.Provider,
                                                                 store_path: Path) -> None:
    add(p, "likes tea")
    text = "  I use vim.\r\n---\nkey: looks like YAML\n"
    scratch = store_path / SHARED_UG / "My Vim Note.md"
    scratch.write_bytes(text.encode("utf-8"))
    started = int(time.time() * 1000)
    out = json.loads(ok("adopt", "--yes", "--json", store=store_path))
    assert len(out) == 1 and out[0]["kind"] == "added"
    entry = out[0]["entry"]
    new = store_path / SHARED_UG / f"{entry['id']}.md"
    assert out[0]["moveTo"] == rel(store_path, new)
    assert not scratch.exists() and new.exists()
    uuid.UUID(entry["id"], version=4)
    listed = [e for e in p.list_entries() if e["id"] == entry["id"]]
    assert len(listed) == 1
    got = listed[0]
    assert got["text"] == text[:-1]  # byte for byte, but for the file's own final newline
    assert (got["track"], got["scope"], got["workspaceKey"], got["agentKey"]) == \
        ("user", "user-global", "", "")
    assert (got["source"], got["version"], got["tags"], got["sessionId"]) == \
        ("hand-edit", 1, [], None)
    assert started <= got["createdAt"] == got["updatedAt"] <= int(time.time() * 1000) + 1000
    data = new.read_bytes()
    assert data.startswith(f"---\nid: \"{entry['id']}\"\n".encode()) or \
        data.startswith(f"---\nid: {entry['id']}\n".encode())
    assert data.endswith(b"\n---\n" + text.encode("utf-8"))  # and the file ends as it did
    tracked = git(store_path, "ls-files", SHARED_UG).split()
    assert rel(store_path, new) in tracked and rel(store_path, scratch) not in tracked
    assert trailers(store_path, "Audit-Entry") == [entry["id"]]
    assert_clean_repo(store_path)


def test_a_partial_front_matter_gets_the_rest(p: filemem.Provider, store_path: Path) -> None:
    add(p, "likes tea")
    path = store_path / SHARED_UG / "tagged.md"
    path.write_text("---\ntags: [editor, \"vim mode\"]\n# mine\nname: vim\n---\nUses vim",
                    encoding="utf-8")
    ok("adopt", "--yes", store=store_path)
    got = [e for e in p.list_entries() if e["text"] == "Uses vim"]
    assert len(got) == 1
    e = got[0]
    assert e["tags"] == ["editor", "vim mode"]
    assert (e["source"], e["version"], e["agentKey"]) == ("hand-edit", 1, "")
    data = file_of(store_path, e["id"]).read_text(encoding="utf-8")
    assert "# mine\n" in data and "name: vim\n" in data
    for key in ("id", "track", "scope", "workspaceKey", "agentKey", "source", "version",
                "createdAt", "updatedAt", "sessionId"):
        assert f"\n{key}: " in data, key
    assert not path.exists()
    assert_clean_repo(store_path)


def test_the_keys_of_a_non_shared_folder_come_from_entries_already_there(
        p: filemem.Provider, store_path: Path) -> None:
    ws, agent = "/home/me/code/My API", "coder"
    there = p.add({**AW, "text": "runs make test"}, ctx(cwd=ws, agent=agent))["entry"]
    folder = file_of(store_path, there["id"]).parent
    assert folder.name == key_dir(agent) and folder.parent.name == key_dir(ws)
    (folder / "more.md").write_text("deploys with fly", encoding="utf-8")
    # a layer folder nobody has written to: the workspace is unknown
    other = store_path / "agent" / "workspace" / key_dir("/elsewhere") / key_dir(agent)
    other.mkdir(parents=True)
    (other / "lost.md").write_text("somewhere else", encoding="utf-8")
    listed = by_path(store_path)
    lost = listed[rel(store_path, other / "lost.md")]
    assert lost["adoptable"] is False
    assert "cannot tell the workspaceKey" in lost["problem"]
    assert "add it to the front-matter" in lost["problem"]
    ok("adopt", "--yes", rel(store_path, folder), store=store_path)
    new = [e for e in p.list_entries() if e["text"] == "deploys with fly"]
    assert len(new) == 1
    assert (new[0]["workspaceKey"], new[0]["agentKey"], new[0]["track"], new[0]["scope"]) == \
        (ws, agent, "agent", "workspace")
    # the agent sees it (and only that agent, in that workspace)
    seen = p.query({"text": "fly"}, {"workspaceKey": ws, "agentKey": agent})
    assert seen["total"] == 1
    assert p.query({"text": "fly"}, {"workspaceKey": ws, "agentKey": "other"})["total"] == 0
    # stating the keys in the front-matter makes the unknown folder's file adoptable
    (other / "lost.md").write_text(
        '---\nworkspaceKey: "/elsewhere"\nagentKey: coder\n---\nsomewhere else',
        encoding="utf-8")
    ok("adopt", "--yes", store=store_path)
    found = [e for e in p.list_entries() if e["text"] == "somewhere else"]
    assert found[0]["workspaceKey"] == "/elsewhere"
    assert_clean_repo(store_path)


def test_adopting_filemem_yaml_changes_the_configuration(p: filemem.Provider,
                                                         store_path: Path) -> None:
    add(p, "likes tea")
    assert p.budgets()[0]["limit"] == 2000
    set_budget(store_path, 123)
    assert p.budgets()[0]["limit"] == 123
    assert trailers(store_path, "Audit-Text") == ['"edited filemem.yaml"']
    assert_clean_repo(store_path)


def test_adopting_a_fix_of_a_bad_file_at_head_repairs_the_store(p: filemem.Provider,
                                                               store_path: Path) -> None:
    add(p, "likes tea")
    eid = str(uuid.uuid4())
    bad = store_path / SHARED_UG / f"{eid}.md"
    bad.write_text(entry_file_text(entry_fields(id=eid, tags=["a", "a"]), "double tag"),
                   encoding="utf-8")
    git(store_path, "add", rel(store_path, bad))
    git(store_path, "commit", "-q", "-m", "my own file")
    with pytest.raises(filemem.ProtocolError) as info:
        p.list_entries()
    assert info.value.code == "STORE_CORRUPT" and str(bad) in info.value.message
    out = fm("list", store=store_path)
    assert out.returncode == 1 and "STORE_CORRUPT" in out.stderr
    # status still works and lists the file as invalid at HEAD (it is as committed)
    [listed] = status_json(store_path)
    assert (listed["path"], listed["kind"], listed["adoptable"]) == \
        (rel(store_path, bad), "invalid", False)
    assert listed["invalidAtHead"]["code"] == "STORE_CORRUPT"
    assert listed["invalidAtHead"]["details"]["subject"] == "my own file"
    bad.write_text(entry_file_text(entry_fields(id=eid, tags=["a"]), "double tag"),
                   encoding="utf-8")
    assert by_path(store_path)[rel(store_path, bad)]["adoptable"] is True
    ok("adopt", "--yes", store=store_path)
    assert texts(p) == ["double tag", "likes tea"]
    assert [e["tags"] for e in p.list_entries() if e["id"] == eid] == [["a"]]
    assert json.loads(ok("verify", "--json", store=store_path))["ok"] is True
    assert_clean_repo(store_path)


def test_adopting_the_deletion_of_a_bad_file_at_head_repairs_the_store(
        p: filemem.Provider, store_path: Path) -> None:
    add(p, "likes tea")
    bad = store_path / SHARED_UG / "oops.md"
    bad.write_text("no front-matter at all", encoding="utf-8")
    git(store_path, "add", rel(store_path, bad))
    git(store_path, "commit", "-q", "-m", "my own file")
    with pytest.raises(filemem.ProtocolError):
        p.list_entries()
    bad.unlink()
    assert by_path(store_path)[rel(store_path, bad)]["kind"] == "deleted"
    out = fm("adopt", "--yes", store=store_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert texts(p) == ["likes tea"]
    assert_clean_repo(store_path)


def test_a_provider_write_never_overwrites_a_hand_edit(p: filemem.Provider,
                                                       store_path: Path) -> None:
    tea = add(p, "likes tea")
    cake = add(p, "likes cake")
    tea_file, cake_file = file_of(store_path, tea["id"]), file_of(store_path, cake["id"])
    set_text(tea_file, "likes green tea")
    cake_file.unlink()
    before = head(store_path)
    calls: list[Callable[[], Any]] = [
        lambda: p.replace({**UG, "match": "tea", "text": "likes coffee"}, ctx()),
        lambda: p.remove({**UG, "match": "tea"}, ctx()),
        lambda: p.remove({**UG, "match": "cake"}, ctx()),
        lambda: p.consolidate({**UG, "matches": ["tea", "cake"], "text": "both"}, ctx())]
    for call in calls:
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        err = info.value
        assert err.code == "WRITE_DENIED" and err.details["outcome"] == "hand-edit-pending"
        assert "filemem status" in err.message
        assert err.details["path"] in (str(tea_file), str(cake_file))
    assert head(store_path) == before
    assert tea_file.read_text(encoding="utf-8").endswith("likes green tea")
    assert not cake_file.exists()
    # an add to the same layer is fine: it touches no hand-edited file
    add(p, "likes biscuits")
    ok("adopt", "--yes", rel(store_path, tea_file), store=store_path)
    p.replace({**UG, "match": "green tea", "text": "likes coffee"}, ctx())
    assert [e["version"] for e in p.list_entries() if e["text"] == "likes coffee"] == [3]
    ok("discard", "--yes", store=store_path)
    p.remove({**UG, "match": "cake"}, ctx())
    assert texts(p) == ["likes biscuits", "likes coffee"]
    assert_clean_repo(store_path)


def test_a_file_saved_by_a_windows_editor_is_adopted(p: filemem.Provider,
                                                     store_path: Path) -> None:
    """CRLF line ends throughout and a UTF-8 byte-order mark: read as the LF text typed."""
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    data = path.read_bytes().replace(b"\n", b"\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + data.replace(b"likes tea\r\n",
                                                    b"likes tea\r\nand oolong\r\n"))
    listed = by_path(store_path)[rel(store_path, path)]
    assert listed["adoptable"] is True
    ok("adopt", "--yes", store=store_path)
    assert texts(p) == ["likes tea\nand oolong"]
    assert path.read_bytes().endswith(b"\n---\nlikes tea\nand oolong\n")  # LF, as filemem writes
    assert [e["version"] for e in p.list_entries()] == [2]
    assert json.loads(ok("verify", "--json", store=store_path))["ok"] is True
    assert_clean_repo(store_path)


def test_files_git_ignores_are_not_hand_edits(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    with open(store_path / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write(".DS_Store\n*~\n")
    put(path.parent / ".DS_Store", "finder")
    put(path.parent / f"{path.name}~", path.read_text(encoding="utf-8"))
    set_text(path, "likes green tea")
    assert git(store_path, "status", "--porcelain").strip() == f"M {rel(store_path, path)}"
    assert [c["path"] for c in status_json(store_path)] == [rel(store_path, path)]
    ok("adopt", "--yes", store=store_path)
    assert texts(p) == ["likes green tea"]


def test_an_ignore_pattern_hides_new_files_but_not_edits_of_tracked_ones(
        p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    with open(store_path / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("*.md\n")  # as in git: says nothing of files already tracked
    set_text(path, "likes green tea")
    put(path.parent / "new-note.md", "a file git ignores")
    assert git(store_path, "status", "--porcelain").strip() == f"M {rel(store_path, path)}"
    assert [c["path"] for c in status_json(store_path)] == [rel(store_path, path)]


def test_moving_an_entry_file_to_another_layer_keeps_its_id(p: filemem.Provider,
                                                           store_path: Path) -> None:
    tea = add(p, "likes tea")
    add(p, "coder note", agent="coder")  # makes the coder folder known
    old = file_of(store_path, tea["id"])
    folder = store_path / "user" / "user-global" / key_dir("coder")
    new = folder / old.name
    new.write_text(old.read_text(encoding="utf-8").replace('agentKey: ""', "agentKey: coder"),
                   encoding="utf-8")
    old.unlink()
    kinds = {c["path"]: c["kind"] for c in status_json(store_path)}
    assert kinds == {rel(store_path, old): "deleted", rel(store_path, new): "added"}
    ok("adopt", "--yes", store=store_path)
    moved = [e for e in p.list_entries() if e["id"] == tea["id"]]
    assert len(moved) == 1 and moved[0]["agentKey"] == "coder"
    assert git(store_path, "ls-files", rel(store_path, new)).strip() == rel(store_path, new)
    assert json.loads(ok("verify", "--json", store=store_path))["ok"] is True
    assert_clean_repo(store_path)


def test_a_moved_entry_gets_the_next_version(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    add(p, "coder note", agent="coder")
    old = file_of(store_path, tea["id"])
    new = store_path / "user" / "user-global" / key_dir("coder") / old.name
    new.write_text(old.read_text(encoding="utf-8").replace('agentKey: ""', "agentKey: coder"),
                   encoding="utf-8")
    old.unlink()
    ok("adopt", "--yes", store=store_path)
    moved = next(e for e in p.list_entries() if e["id"] == tea["id"])
    assert moved["version"] == 2 and moved["updatedAt"] > tea["updatedAt"]


# ---------------------------------------------------------------- adopt: choosing paths


def _three_edits(p: filemem.Provider, store: Path) -> list[str]:
    ids = [add(p, f"note {i}", AW, agent="coder")["id"] for i in range(2)]
    ids.append(add(p, "note 2")["id"])
    paths = [file_of(store, i) for i in ids]
    for i, path in enumerate(paths):
        set_text(path, f"note {i} edited")
    return [rel(store, path) for path in paths]


@pytest.mark.parametrize("how", ["absolute", "store-relative", "cwd-relative", "folder",
                                 "folder-from-inside", "two files"])
def test_adopt_selected_paths(how: str, p: filemem.Provider, store_path: Path) -> None:
    paths = _three_edits(p, store_path)
    a, b, c = paths
    folder = a.rsplit("/", 1)[0]
    assert b.startswith(folder + "/") and not c.startswith(folder + "/")
    cwd: Path | None = None
    if how == "absolute":
        args, want = [str(store_path / a)], {a}
    elif how == "store-relative":
        args, want = [a], {a}
    elif how == "cwd-relative":
        cwd = store_path / "agent"
        args, want = [os.path.relpath(store_path / a, cwd)], {a}
    elif how == "folder":
        args, want = [folder], {a, b}
    elif how == "folder-from-inside":
        cwd = store_path / folder
        args, want = ["."], {a, b}
    else:
        args, want = [a, str(store_path / c)], {a, c}
    out = fm("adopt", "--yes", *args, store=store_path, cwd=cwd)
    assert out.returncode == 0, out.stderr
    assert f"Adopted {counted(len(want), 'change')} in one commit." in out.stdout
    left = {x["path"] for x in status_json(store_path)}
    assert left == set(paths) - want
    committed = set(git(store_path, "show", "--name-only", "--format=", "HEAD").split())
    assert committed == want
    assert len(trailers(store_path, "Audit-Entry")) == len(want)


def test_adopt_of_a_path_without_changes_or_outside_the_store(p: filemem.Provider,
                                                              store_path: Path,
                                                              tmp_path: Path) -> None:
    paths = _three_edits(p, store_path)
    clean = add(p, "untouched")
    before = head(store_path)
    out = fm("adopt", "--yes", rel(store_path, file_of(store_path, clean["id"])),
             store=store_path)
    assert out.returncode == 1 and "INVALID_INPUT" in out.stderr
    assert "no uncommitted change there" in out.stderr
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("x", encoding="utf-8")
    out = fm("adopt", "--yes", str(elsewhere), store=store_path)
    assert out.returncode == 1 and "is not inside the store" in out.stderr
    assert head(store_path) == before
    assert {c["path"] for c in status_json(store_path)} == set(paths)


def test_a_deleted_file_can_be_named_relative_to_the_current_folder(
        p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    path.unlink()
    out = fm("discard", "--yes", path.name, store=store_path, cwd=path.parent)
    assert out.returncode == 0, out.stderr
    assert path.exists()


@pytest.mark.parametrize("command", ["adopt", "discard"])
def test_adopt_and_discard_everything_from_a_project_folder(command: str, p: filemem.Provider,
                                                            store_path: Path,
                                                            tmp_path: Path) -> None:
    project = tmp_path / "project"
    put(project / "README.md", "# my project")  # most project folders have one
    with open(store_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\nmine\n")
    out = fm(command, "--yes", store=store_path, cwd=project)
    assert out.returncode == 0, out.stderr
    assert status_json(store_path) == []
    assert (project / "README.md").read_text(encoding="utf-8") == "# my project"


# ---------------------------------------------------------------- budgets when adopting a part


def test_adopting_part_of_the_edits_never_goes_over_budget(p: filemem.Provider,
                                                           store_path: Path) -> None:
    set_budget(store_path, 30)
    big = add(p, "a" * 20)
    set_text(file_of(store_path, big["id"]), "a")  # would free 19 chars if adopted
    put(store_path / SHARED_UG / "b.md", "b" * 25)
    assert all(c["adoptable"] for c in status_json(store_path))
    out = fm("adopt", "--yes", f"{SHARED_UG}/b.md", store=store_path)  # the shrink not adopted
    used = p.budgets()[0]
    assert used["used"] <= used["limit"], used
    assert out.returncode == 1 and "over budget" in out.stderr


def test_an_edit_over_budget_is_refused_with_every_way_on(p: filemem.Provider,
                                                          store_path: Path) -> None:
    """In a layer already over budget an edit that grows is refused; the refusal names the
    ways on (an edit left unadopted can stop a sync), and raising the budget works."""
    big = add(p, "a" * 25)
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text("utf-8").replace("userGlobal: 2000", "userGlobal: 20", 1),
                   "utf-8")
    git(store_path, "commit", "-q", "-m", "lower the budget", "filemem.yaml")
    path = rel(store_path, file_of(store_path, big["id"]))
    set_text(store_path / path, "a" * 28)
    out = fm("adopt", "--yes", store=store_path)
    assert out.returncode == 1
    for way in ("needs 28/20 chars", "shorten this text",
                "delete other entries' files of that layer and adopt that with it",
                "raise budgets.user.userGlobal in filemem.yaml and "
                "`filemem adopt filemem.yaml` first", f"`filemem discard {path}`"):
        assert way in out.stderr, (way, out.stderr)
    # the budget way, as the message says it
    cfg.write_text(cfg.read_text("utf-8").replace("userGlobal: 20", "userGlobal: 40", 1),
                   "utf-8")
    ok("adopt", "--yes", "filemem.yaml", store=store_path)
    ok("adopt", "--yes", store=store_path)
    assert texts(p) == ["a" * 28]


def test_adopting_one_file_that_fits_is_not_refused_for_another(p: filemem.Provider,
                                                                store_path: Path) -> None:
    set_budget(store_path, 30)
    put(store_path / SHARED_UG / "a.md", "a" * 20)
    put(store_path / SHARED_UG / "b.md", "b" * 20)
    out = fm("adopt", "--yes", f"{SHARED_UG}/a.md", store=store_path)
    assert out.returncode == 0, out.stderr
    assert texts(p) == ["a" * 20]


def test_adopting_everything_checks_the_budget_of_the_sum(p: filemem.Provider,
                                                          store_path: Path) -> None:
    set_budget(store_path, 30)
    put(store_path / SHARED_UG / "a.md", "a" * 20)
    put(store_path / SHARED_UG / "b.md", "b" * 20)
    listed = status_json(store_path)
    assert all(c["adoptable"] is False and "over budget" in c["problem"] for c in listed)
    assert "40/30" in listed[0]["problem"]
    before = head(store_path)
    assert fm("adopt", "--yes", store=store_path).returncode == 1
    assert head(store_path) == before and texts(p) == []
    # shrinking an entry makes room: an edit that frees budget counts
    big = add(p, "c" * 5)
    (store_path / SHARED_UG / "b.md").unlink()
    set_text(file_of(store_path, big["id"]), "c")
    assert all(c["adoptable"] for c in status_json(store_path))
    ok("adopt", "--yes", store=store_path)
    assert p.budgets()[0]["used"] == 21


# ---------------------------------------------------------------- discard


def test_discard_restores_and_deletes(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    cake = add(p, "likes cake")
    tea_file, cake_file = file_of(store_path, tea["id"]), file_of(store_path, cake["id"])
    committed = {rel(store_path, f): git(store_path, "show", f"HEAD:{rel(store_path, f)}")
                 for f in (tea_file, cake_file)}
    readme = (store_path / "README.md").read_bytes()
    set_text(tea_file, "likes green tea")
    cake_file.unlink()
    put(store_path / SHARED_UG / "new.md", "brand new")
    put(store_path / SHARED_UG / "junk.txt", "junk")
    (store_path / "README.md").write_bytes(readme + b"\nmine\n")
    before = head(store_path)
    out = fm("discard", "--yes", store=store_path)
    assert out.returncode == 0, out.stderr
    assert "Discarded 5 changes." in out.stdout
    for path, data in committed.items():
        assert (store_path / path).read_text(encoding="utf-8") == data
    assert not (store_path / SHARED_UG / "new.md").exists()
    assert not (store_path / SHARED_UG / "junk.txt").exists()
    assert (store_path / "README.md").read_bytes() == readme
    assert head(store_path) == before  # discarding commits nothing
    assert status_json(store_path) == []
    assert_clean_repo(store_path)
    # and the entries can be written again
    p.replace({**UG, "match": "tea", "text": "likes coffee"}, ctx())
    assert texts(p) == ["likes cake", "likes coffee"]


def test_discard_asks_first(p: filemem.Provider, store_path: Path) -> None:
    tea = add(p, "likes tea")
    path = file_of(store_path, tea["id"])
    set_text(path, "likes green tea")
    out = fm("discard", store=store_path)
    assert out.returncode == 3 and "Nothing discarded." in out.stderr
    assert "no terminal to ask; pass --yes" in out.stderr
    assert f"M {rel(store_path, path)}" in out.stderr
    assert path.read_text(encoding="utf-8").endswith("likes green tea")
    for answer in (b"\n", b"n\n"):
        code, screen = run_at_terminal(["discard", "--store", str(store_path)], answer,
                                   b"Discard 1 change?")
        assert code == 3, screen
        assert "[y/N]" in screen and "cannot be undone" in screen
        assert path.read_text(encoding="utf-8").endswith("likes green tea")
    code, screen = run_at_terminal(["discard", "--store", str(store_path)], b"y\n",
                               b"Discard 1 change?")
    assert code == 0, screen
    assert "Discarded 1 change." in screen
    assert path.read_text(encoding="utf-8").endswith("\nlikes tea\n")
    assert_clean_repo(store_path)


def test_discard_selected_paths(p: filemem.Provider, store_path: Path) -> None:
    paths = _three_edits(p, store_path)
    put(store_path / SHARED_UG / "new.md", "new")
    out = json.loads(ok("discard", "--yes", "--json", paths[0],
                        str(store_path / SHARED_UG / "new.md"), store=store_path))
    assert sorted(c["path"] for c in out) == sorted([paths[0], f"{SHARED_UG}/new.md"])
    assert {c["path"] for c in status_json(store_path)} == set(paths[1:])
    assert (store_path / paths[0]).read_text(encoding="utf-8").endswith("\nnote 0\n")
    # a folder, from inside it
    folder = store_path / paths[1].rsplit("/", 1)[0]
    ok("discard", "--yes", ".", store=store_path, cwd=folder)
    assert {c["path"] for c in status_json(store_path)} == {paths[2]}
    ok("discard", "--yes", store=store_path)
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- gaps


def test_status_shows_the_id_adopt_will_give(p: filemem.Provider, store_path: Path) -> None:
    (store_path / SHARED_UG).mkdir(parents=True, exist_ok=True)
    put(store_path / SHARED_UG / "n.md", "a note")
    shown = by_path(store_path)[f"{SHARED_UG}/n.md"]
    again = by_path(store_path)[f"{SHARED_UG}/n.md"]
    done = json.loads(ok("adopt", "--yes", "--json", store=store_path))
    assert shown["id"] == again["id"] == done[0]["id"]


def test_adopt_json_reports_a_refusal_as_json(p: filemem.Provider, store_path: Path) -> None:
    (store_path / SHARED_UG).mkdir(parents=True, exist_ok=True)
    put(store_path / SHARED_UG / "bad.md", "---\ntags: [\n---\nx")
    out = fm("adopt", "--yes", "--json", store=store_path)
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["code"] == "INVALID_INPUT"


def test_an_empty_store_has_no_layer_folders_yet(store_path: Path,
                                                 make_provider: MakeProvider) -> None:
    """A brand-new store: a person creates the folder and writes the first entry by hand."""
    make_provider()
    folder = store_path / SHARED_UG
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "first.md").write_text("my first memory", encoding="utf-8")
    listed = status_json(store_path)
    assert [c["kind"] for c in listed] == ["added"] and listed[0]["adoptable"]
    ok("adopt", "--yes", store=store_path)
    entry = json.loads(ok("list", "--json", store=store_path))[0]
    assert (entry["text"], entry["source"]) == ("my first memory", "hand-edit")
    assert_clean_repo(store_path)
