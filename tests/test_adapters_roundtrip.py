"""Faithful round trips through the adapters' metadata: a Claude Code auto-memory folder
and mem0 items come back as they went in while filemem did not change them; a changed one
is written fresh; exporting into a live folder keeps what is not filemem's; importing what
was exported adds nothing. Registry-level properties, then the real CLI on real files."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import filemem
from filemem.adapters import default_registry
from tests.conftest import assert_clean_repo, git, run_cli

FIX = Path(__file__).resolve().parent / "fixtures" / "adapters"
CLAUDE_FIXTURES = {
    "claude": FIX / "claude" / "projects" / "-Users-me-code-api" / "memory",
    "claude-live": FIX / "claude-live" / "projects" / "-home-ana-code-shop" / "memory",
}
CLAUDE, MEM0 = "claude-code-memory-md", "mem0"
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def folder(path: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(path.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def stored(adapted: list[dict[str, Any]], ids: list[str] | None = None
           ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What a store holds after importing ``adapted``: protocol entries and their metadata."""
    entries, metadata = [], {}
    for i, e in enumerate(adapted):
        eid = ids[i] if ids else str(uuid.UUID(int=i + 1, version=4))
        meta = e.get("meta")
        entries.append({"id": eid, "workspaceKey": "", "agentKey": "", "source": CLAUDE,
                        "createdAt": 1764460800000 + i, "updatedAt": 1764460800000 + i,
                        **{k: v for k, v in e.items() if k != "meta"}})
        if meta:
            metadata[eid] = meta
    return entries, metadata


def claude_round_trip(files: dict[str, str], change: dict[int, str] | None = None
                      ) -> tuple[dict[str, str], list[dict[str, Any]]]:
    registry = default_registry()
    entries, metadata = stored(registry.adapt(CLAUDE, {"files": files}))
    for i, text in (change or {}).items():
        entries[i]["text"] = text
    return registry.export(CLAUDE, entries, metadata)["files"], entries


# ---------------------------------------------------------------- Claude Code: properties


WORD = st.sampled_from(["tests", "Postgres", "deploy", "staging", "review", "Go", "sqlc",
                        "release", "中文", "payments", "docs", "CI", "flaky", "🚀"])
SENTENCE = st.lists(WORD, min_size=2, max_size=7).map(" ".join)
BODY_LINE = st.one_of(
    SENTENCE, SENTENCE.map(lambda s: f"**Why:** {s}."),
    SENTENCE.map(lambda s: f"**How to apply:** {s}"), SENTENCE.map(lambda s: f"- {s}"),
    st.just("```sh\nmake test\n```"), st.just(""))
STEM = st.one_of(st.sampled_from(["feedback_db_tests", "user-role", "project_release",
                                  "reference_grafana", "deploy-zh", "feedback_style"]),
                 st.from_regex(r"[a-z][a-z0-9_-]{0,18}", fullmatch=True))


@st.composite
def memory_file(draw: st.DrawFn, stem: str) -> str:
    body_lines = draw(st.lists(BODY_LINE, min_size=1, max_size=5))
    body = "\n".join(body_lines).strip("\n")
    assume(body.strip())
    first = next(x for x in body.split("\n") if x.strip())
    description = draw(st.one_of(st.just(first.strip()), SENTENCE))
    kind = draw(st.sampled_from(["user", "feedback", "project", "reference"]))
    keys = [f"name: {draw(st.sampled_from([stem, stem.replace('_', '-')]))}",
            f"description: {json.dumps(description, ensure_ascii=False)}"]
    keys.append(draw(st.sampled_from([f"type: {kind}", f"metadata:\n  type: {kind}",
                                      f"metadata:\n  type: {kind}\n  confidence: high"])))
    extra = draw(st.lists(st.sampled_from(
        ["modified: 2026-11-02T09:41:17.204Z",
         "originSessionId: 5b1d6a0e-2f3c-4e7a-9b1d-0c2e4f6a8b9d",
         "# written by Claude Code", "x-custom: kept"]), unique=True, max_size=3))
    order = draw(st.permutations(keys + extra))
    around = draw(st.sampled_from([("", "\n"), ("", ""), ("\n", "\n"), ("\n", "\n\n")]))
    return "---\n" + "\n".join(order) + "\n---\n" + around[0] + body + around[1]


@st.composite
def claude_folder(draw: st.DrawFn) -> dict[str, str]:
    stems = draw(st.lists(STEM, min_size=1, max_size=6, unique_by=str.lower))
    assume("memory" not in [s.lower() for s in stems])
    files = {f"{s}.md": draw(memory_file(s)) for s in stems}
    if draw(st.booleans()):
        files["debugging.md"] = draw(st.sampled_from([
            "## Flaky test\n- fails after TestCoupons\n- reproduce:\n  ```sh\n  go test\n  ```\n",
            "# Notes\n\nThe sandbox rejects big amounts.\n\n## More\n- one\n- two",
        ]))
    listed = draw(st.lists(st.sampled_from(sorted(files)), unique=True))
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["# Memory Index", ""]
    for name in draw(st.permutations(listed)):
        if draw(st.integers(0, 4)) == 0:
            lines += ["", f"## {draw(WORD)}"]
        lines.append(f"- [{draw(SENTENCE)}]({name}) \u2014 {draw(SENTENCE)}")
        if draw(st.integers(0, 5)) == 0:
            lines.append(f"- [{draw(SENTENCE)}]({name}) \u2014 listed twice")
    if draw(st.booleans()):
        lines += ["", draw(SENTENCE) + "."]
    if draw(st.booleans()):
        lines.append("- [Gone](gone.md) \u2014 a file deleted by hand")
    if lines or draw(st.booleans()):
        files["MEMORY.md"] = "\n".join(lines) + draw(st.sampled_from(["\n", ""]))
    return files


@SETTINGS
@given(claude_folder())
def test_claude_folder_comes_back_byte_for_byte(files: dict[str, str]) -> None:
    back, _ = claude_round_trip(files)
    expected = dict(files)
    expected.setdefault("MEMORY.md", back.get("MEMORY.md", ""))  # made when there was none
    assert back == expected


@SETTINGS
@given(claude_folder(), st.data())
def test_a_changed_memory_gets_a_fresh_description_and_line_and_nothing_else_moves(
        files: dict[str, str], data: st.DataObject) -> None:
    registry = default_registry()
    adapted = registry.adapt(CLAUDE, {"files": files})
    memories = [i for i, e in enumerate(adapted)
                if "prefix" in e.get("meta", {}).get(f"x-{CLAUDE}", {}).get("data", {})]
    assume(memories)
    i = data.draw(st.sampled_from(memories))
    file = adapted[i]["meta"][f"x-{CLAUDE}"]["data"]["file"]
    new = "Changed in filemem: run the tests twice\n\nbecause of the flaky one."
    back, _ = claude_round_trip(files, {i: new})
    assert set(back) - {"MEMORY.md"} == set(files) - {"MEMORY.md"}  # the same file names
    for name in files:
        if name not in (file, "MEMORY.md"):
            assert back[name] == files[name]
    fresh = back[file]
    assert "\ndescription: \"Changed in filemem: run the tests twice\"\n" in fresh
    assert fresh.endswith("\n---\n" + new + "\n")
    lines = [x for x in back["MEMORY.md"].split("\n") if f"]({file})" in x]
    assert lines[0].endswith(f"]({file}) \u2014 Changed in filemem: run the tests twice")
    assert lines[1:] == [x for x in files.get("MEMORY.md", "").split("\n")
                         if f"]({file})" in x][1:]  # a second line for it is not filemem's
    if "MEMORY.md" in files:  # every other line stays as it was
        before = [x for x in files["MEMORY.md"].split("\n") if f"]({file})" not in x]
        others = [x for x in back["MEMORY.md"].split("\n") if f"]({file})" not in x]
        assert others[:len(before)] == before and not any(others[len(before):])


@pytest.mark.parametrize("name", sorted(CLAUDE_FIXTURES))
def test_claude_fixture_folders_come_back_byte_for_byte(name: str) -> None:
    files = {n: t for n, t in folder(CLAUDE_FIXTURES[name]).items() if n.endswith(".md")}
    back, _ = claude_round_trip(files)
    assert back == files


def test_changed_notes_take_their_place() -> None:
    files = folder(CLAUDE_FIXTURES["claude-live"])
    adapted = default_registry().adapt(CLAUDE, {"files": files})
    texts = [e["text"] for e in adapted]
    index_note = texts.index("Ask before touching the payments schema.")
    topic_note = texts.index("The sandbox rejects amounts over 10,000.00; use 9,999.99 in "
                             "fixtures.")
    back, _ = claude_round_trip(files, {index_note: "Ask Lin before touching payments.",
                                        topic_note: "The sandbox takes up to 50,000.00."})
    assert back["MEMORY.md"] == files["MEMORY.md"].replace(
        "Ask before touching the payments schema.", "Ask Lin before touching payments.")
    assert back["debugging.md"] == files["debugging.md"].replace(
        texts[topic_note], "The sandbox takes up to 50,000.00.")


def test_copies_and_broken_metadata_are_written_fresh() -> None:
    files = folder(CLAUDE_FIXTURES["claude-live"])
    registry = default_registry()
    adapted = registry.adapt(CLAUDE, {"files": files})
    db = next(i for i, e in enumerate(adapted) if "real Postgres" in e["text"])
    twin = dict(adapted[db])  # a sync conflict's fork: the same metadata twice
    broken = dict(adapted[db], text="Broken by hand", meta={f"x-{CLAUDE}": {
        "textSha256": "0" * 64, "data": {"file": "../../etc/passwd", "prefix": 3}}})
    entries, metadata = stored([*adapted, twin, broken])
    out = registry.export(CLAUDE, entries, metadata)["files"]
    assert out["feedback_db_tests.md"] == files["feedback_db_tests.md"]
    assert out["feedback_db_tests-2.md"].startswith("---\nname: feedback_db_tests\n")
    assert out["feedback_db_tests-3.md"].endswith("\n---\nBroken by hand\n")  # its name: tag
    assert all("/" not in name for name in out)


# ---------------------------------------------------------------- mem0: properties


MEM0_ITEM = st.fixed_dictionaries({
    "id": st.uuids().map(str), "memory": SENTENCE,
    "hash": st.from_regex(r"[0-9a-f]{32}", fullmatch=True),
    "metadata": st.one_of(st.none(), st.fixed_dictionaries(
        {"source": st.sampled_from(["chat", "api"])},
        optional={"tags": st.lists(WORD.filter(lambda w: " " not in w), max_size=2),
                  "score": st.floats(0, 1), "nested": st.just({"a": [1, None, True]})})),
    "created_at": st.just("2026-07-25T23:57:00.108347-07:00"),
    "updated_at": st.just("2026-07-26T08:00:00+00:00"),
}, optional={"user_id": st.just("alex"), "agent_id": st.just("coder"),
             "run_id": st.just("run-42"), "actor_id": st.just("alex"),
             "role": st.sampled_from(["user", "assistant"]),
             "categories": st.lists(st.sampled_from(["work", "food"]), unique=True),
             "expiration_date": st.none()})


@SETTINGS
@given(st.lists(MEM0_ITEM, min_size=1, max_size=5, unique_by=lambda i: i["id"]))
def test_mem0_items_come_back_key_for_key(items: list[dict[str, Any]]) -> None:
    registry = default_registry()
    entries, metadata = stored(registry.adapt(MEM0, {"results": items}))
    assert registry.export(MEM0, entries, metadata) == {"results": items}
    # changed in filemem: the same mem0 item, with a fresh text, hash, time and tags
    entries[0]["text"] = "Changed in filemem"
    entries[0]["updatedAt"] = 1764460800999
    entries[-1]["agentKey"] = "coder" if len(entries) > 1 else ""
    out = registry.export(MEM0, entries, metadata)["results"]
    first = out[0]
    kept = {k: v for k, v in items[0].items()
            if k in ("id", "created_at", "run_id", "actor_id", "role", "expiration_date")}
    assert {k: first[k] for k in kept} == kept
    assert first["memory"] == "Changed in filemem" and first["updated_at"] == \
        "2025-11-30T00:00:00.999Z"
    assert first["hash"] == hashlib.md5(b"Changed in filemem").hexdigest()
    assert {k: v for k, v in first["metadata"].items() if k not in ("tags", "filemem")} == \
        {k: v for k, v in (items[0]["metadata"] or {}).items() if k not in ("tags",)}
    if len(entries) > 1:  # moved to an agent's layer: says so, so it imports back there
        assert out[-1]["metadata"]["filemem"]["agentKey"] == "coder"
        assert {k: v for k, v in out[-1].items() if k != "metadata"} == \
            {k: v for k, v in items[-1].items() if k != "metadata"}
    back = registry.adapt(MEM0, {"results": out})
    assert [e["text"] for e in back] == [e["text"] for e in entries]


# ---------------------------------------------------------------- the real CLI


def ok(*args: str, store: Path) -> str:
    out = run_cli(*args, store=store)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout + out.stderr


def listed(store: Path) -> list[dict[str, Any]]:
    return json.loads(run_cli("list", "--json", store=store).stdout)  # type: ignore[no-any-return]


@pytest.fixture
def live(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A store, a project folder and Claude Code's live memory folder for it."""
    store = tmp_path / "store"
    run_cli("init", str(store))
    project = tmp_path / "shop"
    project.mkdir()
    memory = tmp_path / ".claude" / "projects" / "-x-shop" / "memory"
    shutil.copytree(CLAUDE_FIXTURES["claude-live"], memory)
    return store, project, memory


def test_cli_import_then_export_gives_the_folder_back(live: tuple[Path, Path, Path],
                                                      tmp_path: Path) -> None:
    store, project, memory = live
    ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
       store=store)
    out = tmp_path / "out"
    said = ok("export", "--adapter", CLAUDE, "--out", str(out), store=store)
    assert folder(out) == {n: t for n, t in folder(memory).items() if n.endswith(".md")}
    assert "feedback_db_tests.md" in said and "feedback-db-tests.md" not in said
    # what the model sees has none of it
    snapshot = run_cli("snapshot", "--workspace", str(project), store=store).stdout
    assert "Integration tests must hit a real Postgres" in snapshot
    for hidden in ("originSessionId", "x-claude-code-memory-md", "textSha256", "Memory Index",
                   "confidence: high"):
        assert hidden not in snapshot
    assert all(set(e) == set(listed(store)[0]) for e in listed(store))
    report = ok("verify", store=store)
    assert "OK: HEAD is exactly what the audited history produces." in report
    assert_clean_repo(store)


def test_cli_export_into_the_live_folder_and_import_it_back(live: tuple[Path, Path, Path]
                                                            ) -> None:
    store, project, memory = live
    ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
       store=store)
    original = folder(memory)
    # Claude Code goes on writing its memory; the person changes one memory in filemem
    (memory / "project_new_api.md").write_text(
        "---\nname: project_new_api\ndescription: The v2 API lives under /api/v2\n"
        "metadata:\n  type: project\n---\nThe v2 API lives under /api/v2.\n", encoding="utf-8")
    index = original["MEMORY.md"].replace(
        "- [Staging](reference_staging.md)",
        "- [New API](project_new_api.md) \u2014 the v2 API\n- [Staging](reference_staging.md)")
    (memory / "MEMORY.md").write_text(index, encoding="utf-8")
    ok("replace", "--track", "user", "--scope", "workspace", "--workspace", str(project),
       "Conventional Commits", "Commit messages follow Conventional Commits, subject under "
       "72 characters, no emoji.", "--yes", store=store)
    ok("add", "--track", "agent", "--scope", "workspace", "--workspace", str(project),
       "The shop runs on Go 1.23", "--yes", store=store)
    stat_before = {n: os.stat(memory / n).st_mtime_ns for n in original}
    n_commits = git(store, "rev-list", "--count", "HEAD")
    # without --force: names the files that would change, writes nothing
    refused = run_cli("export", "--adapter", CLAUDE, "--out", str(memory), store=store)
    assert refused.returncode == 1
    assert "already has MEMORY.md, feedback_commit_style.md; pass --force" in refused.stderr
    said = ok("export", "--adapter", CLAUDE, "--out", str(memory), "--force", store=store)
    assert "Wrote 3 files" in said and "already up to date" in said
    again = ok("export", "--adapter", CLAUDE, "--out", str(memory), store=store)
    assert again.startswith(f"Nothing to write in {memory}: ") and "already up to date" in again
    now = folder(memory)
    # the files export does not write stay as they are, Claude's new memory too
    assert now["notes.txt"] == original["notes.txt"]
    assert now["project_new_api.md"].startswith("---\nname: project_new_api\n")
    for name in ("feedback_db_tests.md", "debugging.md", "user_prefs.md"):
        assert now[name] == original[name]
        assert os.stat(memory / name).st_mtime_ns == stat_before[name]  # not even rewritten
    # the changed memory keeps its file name, with a fresh description
    assert "\ndescription: Commit messages follow Conventional Commits, subject under 72 " \
           "characters, no emoji.\n" in now["feedback_commit_style.md"]
    assert not (memory / "feedback-commit-style.md").exists()
    # MEMORY.md: its lines stay, Claude's new line too; the changed memory's line is fresh,
    # in its place; the new entry's line comes last
    lines = now["MEMORY.md"].split("\n")
    assert lines[:4] == ["# Memory Index", "", "## Feedback",
                         "- [DB tests](feedback_db_tests.md) \u2014 integration tests hit a "
                         "real Postgres"]
    assert lines[4] == ("- [feedback_commit_style](feedback_commit_style.md) \u2014 Commit "
                        "messages follow Conventional Commits, subject under 72 characters, "
                        "no emoji.")
    assert "- [New API](project_new_api.md) \u2014 the v2 API" in lines
    assert "Ask before touching the payments schema." in lines
    assert lines[-2] == ("- [project-the-shop-runs-on-go-1](project-the-shop-runs-on-go-1.md) "
                         "\u2014 The shop runs on Go 1.23") \
        and lines[-1] == ""
    assert git(store, "rev-list", "--count", "HEAD") == n_commits  # export is read-only
    # importing the live folder back brings in only what filemem does not have: what Claude
    # wrote since, and a memory removed in filemem after the export (its file stays there)
    ok("remove", "--track", "agent", "--scope", "workspace", "--workspace", str(project),
       "Go 1.23", "--yes", store=store)
    said = ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
              store=store)
    assert said.startswith("Imported 2 entries via adapter claude-code-memory-md")
    assert "Skipped 9 entries already in memory" in said
    texts = [e["text"] for e in listed(store)]
    assert len(texts) == len(set(texts)) == 11
    said = ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
              store=store)
    assert said.startswith("Nothing to import: 11 entries already in memory;")
    assert len(listed(store)) == 11


def test_cli_a_memory_changed_in_filemem_is_not_brought_back_in_its_old_version(
        live: tuple[Path, Path, Path]) -> None:
    store, project, memory = live
    ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
       store=store)
    ok("replace", "--track", "user", "--scope", "workspace", "--workspace", str(project),
       "real Postgres", "Integration tests hit Postgres 16 in docker", "--yes", store=store)
    # the live folder still has the version imported: importing it again adds nothing
    said = ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(project), "--yes",
              store=store)
    assert said.startswith("Nothing to import: 8 entries already in memory, 1 entry imported "
                           "before in this version and changed in filemem since;")
    skipped = json.loads(run_cli("import", "--adapter", CLAUDE, str(memory), "--workspace",
                                 str(project), "--yes", "--json", store=store).stdout)["skipped"]
    assert [s["text"] for s in skipped if s["why"] == "imported-before"] == [
        next(e["text"] for e in default_registry().adapt(CLAUDE, {"files": folder(memory)})
             if "real Postgres, never mocks" in e["text"])]
    assert [e["text"] for e in listed(store)].count(
        "Integration tests hit Postgres 16 in docker") == 1
    assert not any("real Postgres, never mocks" in e["text"] for e in listed(store))
    # imported into another workspace, the same files are other memories
    other = project.parent / "other"
    other.mkdir()
    said = ok("import", "--adapter", CLAUDE, str(memory), "--workspace", str(other), "--yes",
              store=store)
    assert said.startswith("Imported 9 entries")


def test_cli_mem0_round_trip(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_cli("init", str(store))
    given = json.loads((FIX / "mem0" / "results.json").read_text(encoding="utf-8"))
    ok("import", "--adapter", MEM0, str(FIX / "mem0" / "results.json"), "--yes", store=store)
    ok("replace", "--track", "user", "--scope", "user-global", "中文回复",
       "用户偏好中文回复", "--yes", store=store)
    out = tmp_path / "mem0.json"
    ok("export", "--adapter", MEM0, "--out", str(out), store=store)
    back = json.loads(out.read_text(encoding="utf-8"))["results"]
    assert back[0] == given["results"][0] and back[2] == given["results"][2]
    changed = back[1]
    assert changed["id"] == given["results"][1]["id"]
    assert changed["created_at"] == given["results"][1]["created_at"]
    assert changed["memory"] == "用户偏好中文回复"
    assert changed["updated_at"] != given["results"][1]["updated_at"]
    # importing the export back adds nothing
    said = ok("import", "--adapter", MEM0, str(out), "--yes", store=store)
    assert said.startswith("Nothing to import: 3 entries already in memory;")
    # the version mem0 still has of the changed one is not brought back either
    said = ok("import", "--adapter", MEM0, str(FIX / "mem0" / "results.json"), "--yes",
              store=store)
    assert said.startswith("Nothing to import: 2 entries already in memory, 1 entry imported "
                           "before in this version and changed in filemem since;")


def test_claude_files_as_people_and_tools_leave_them() -> None:
    files = {
        "部署 notes.md": "---\nname: deploy\ndescription: 部署前先跑冒烟测试\n---\n"
                         "部署前先跑冒烟测试。",
        "bom.md": "\ufeff---\nname: bom\ndescription: Written by an editor that adds a BOM\n"
                  "metadata:\n  type: reference\n---\nWritten by an editor that adds a BOM\n",
        "crlf.md": "---\r\nname: crlf\r\ndescription: Windows line ends\r\n---\r\nLine one\r\n"
                   "Line two\r\n",
        "MEMORY.md": "- [部署](部署%20notes.md) \u2014 冒烟测试\n- [BOM](bom.md) \u2014 bom\n"
                     "- [CRLF](./crlf.md) \u2014 crlf   \n",
    }
    back, _ = claude_round_trip(files)
    assert back == {**files, "crlf.md": files["crlf.md"].replace("\r\n", "\n")}  # LF ends
    # a front-matter too big to keep is refused, saying which file and what to do
    huge = {"big.md": "---\nname: big\nnotes: " + "x" * 17_000 + "\n---\nbody\n"}
    with pytest.raises(filemem.ProtocolError) as info:
        default_registry().adapt(CLAUDE, {"files": huge})
    assert info.value.code == "ADAPTER_PAYLOAD" and "big.md: the front-matter is 17" in \
        info.value.message and "shorten it and import again" in info.value.message


def test_export_into_a_live_memory_md() -> None:
    files = folder(CLAUDE_FIXTURES["claude-live"])
    registry = default_registry()
    entries, metadata = stored(registry.adapt(CLAUDE, {"files": files}))
    texts = [e["text"] for e in entries]
    note = texts.index("Ask before touching the payments schema.")
    staging = next(i for i, t in enumerate(texts) if t.startswith("Staging is"))
    entries[note]["text"] = "Ask Lin before touching payments."
    entries[staging]["text"] = "Staging moved to https://stg.shop.internal"
    # Claude Code changed its MEMORY.md since: a line of its own, a heading, a line gone
    live = files["MEMORY.md"].replace(
        "## Project\n", "## Project\n- [Theirs](theirs.md) \u2014 Claude's own\n").replace(
        "- [DB tests](feedback_db_tests.md) \u2014 integration tests hit a real Postgres\n", "")
    out = registry.export(CLAUDE, entries, metadata, {"files": {"MEMORY.md": live}})["files"]
    assert out["MEMORY.md"] == live.replace(
        "Ask before touching the payments schema.", "Ask Lin before touching payments.").replace(
        "- [Staging](reference_staging.md) \u2014 where staging lives",
        "- [reference_staging](reference_staging.md) \u2014 Staging moved to "
        "https://stg.shop.internal") + \
        "- [DB tests](feedback_db_tests.md) \u2014 integration tests hit a real Postgres\n"
    # a changed note that is no longer there is added at the end, not lost
    gone = live.replace("\nAsk before touching the payments schema.\n", "\n")
    out = registry.export(CLAUDE, entries, metadata, {"files": {"MEMORY.md": gone}})["files"]
    assert out["MEMORY.md"].endswith("\n\nAsk Lin before touching payments.\n")
    assert out["MEMORY.md"].count("Ask") == 1
    # without a MEMORY.md there, it is the export's own
    alone = registry.export(CLAUDE, entries, metadata, {"files": {}})["files"]
    assert alone == registry.export(CLAUDE, entries, metadata)["files"]
