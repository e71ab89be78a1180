"""Fast paths taken for the common case (ASCII text, a batch of ids, repeated audit values,
many index entries at once) give exactly what the general paths give."""

from __future__ import annotations

import copy
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import filemem
from filemem import shown
from filemem.files import codec
from filemem.files.gitindex import GitIndex, hash_blob
from filemem.jsstr import _ASCII_LOWER, ascii_lower
from filemem.model import LAYERS, Entry, new_ids
from filemem.store import auditlog
from filemem.store.state import State
from tests.conftest import BIG, git
from tests.test_properties import entries


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(max_codepoint=127)), st.text()))
def test_ascii_lower_and_plain_agree_with_their_general_forms(text: str) -> None:
    assert ascii_lower(text) == text.translate(_ASCII_LOWER)
    assert shown.plain(text) == (shown._maybe().search(text) is None)


def test_plain_tells_every_ascii_control_character() -> None:
    for code in range(128):
        text = f"a{chr(code)}b"
        assert shown.plain(text) == (shown._maybe().search(text) is None), code
        assert shown.plain(text) == (chr(code) in "\t\n" or 0x20 <= code < 0x7f), code


def test_a_batch_of_ids_are_distinct_version_4_uuids_in_their_usual_form() -> None:
    ids = new_ids(2000)
    assert len(set(ids)) == 2000
    for i in ids:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122
    assert new_ids(0) == []


def test_a_commit_message_is_the_same_whether_values_repeat_or_not() -> None:
    def rows(n: int, same: bool) -> list[auditlog.AuditRow]:
        out = []
        for i in range(n):
            r = auditlog.row("add", track="user", scope="workspace", entry_id=f"id-{i}",
                             text=f"text {i}\n", outcome="allowed-once" if same else f"o{i}",
                             source="filemem" if same else f"src {i}",
                             session_id="s1" if same else f"s {i} \u2028")
            r["seq"], r["ts"] = 1000 + i, 77
            out.append(r)
        return out

    for same in (True, False):
        made = rows(50, same)
        message = auditlog.commit_message("seed 50 entries", "body", made)
        by_row = [auditlog.commit_message("s", "", [r]).split("\n\n", 1)[1] for r in made]
        assert message == "seed 50 entries\n\nbody\n\n" + "".join(by_row)
        assert auditlog.parse_rows(message) == made


def test_a_commit_message_writes_each_row_as_the_trailer_grammar_says() -> None:
    # a row with an entry (one f-string) and rows without one, or with values that must be
    # JSON strings (line by line): the same grammar either way
    made = [auditlog.row("add", track="user", scope="user-global",
                         entry_id="0f7c1b1e-4a5b-4c3d-9e8f-001122334455",
                         text="Prefers replies in Chinese",
                         outcome="allowed-once (via approval, writePolicy auto)",
                         source="filemem", session_id="s1"),
            auditlog.row("seed", text="user/user-global: a\u2028b", outcome="allowed",
                         source=" padded", session_id=None),
            auditlog.row("add", track="agent", scope="workspace", entry_id="bad id\x85",
                         text="\u00e9", outcome="allowed", source="filemem")]
    for i, r in enumerate(made):
        r["seq"], r["ts"] = 1811550000000000 + i, 1764467353123
    assert auditlog.commit_message("add user/user-global: Prefers", "", made) == (
        "add user/user-global: Prefers\n\n"
        "Audit-Seq: 1811550000000000\nAudit-Ts: 1764467353123\nAudit-Action: add\n"
        "Audit-Track: user\nAudit-Scope: user-global\n"
        "Audit-Entry: 0f7c1b1e-4a5b-4c3d-9e8f-001122334455\n"
        "Audit-Outcome: allowed-once (via approval, writePolicy auto)\n"
        "Audit-Source: filemem\nAudit-Session: s1\n"
        'Audit-Text: "Prefers replies in Chinese"\n'
        "Audit-Seq: 1811550000000001\nAudit-Ts: 1764467353123\nAudit-Action: seed\n"
        'Audit-Outcome: allowed\nAudit-Source: " padded"\n'
        'Audit-Text: "user/user-global: a\\u2028b"\n'
        "Audit-Seq: 1811550000000002\nAudit-Ts: 1764467353123\nAudit-Action: add\n"
        "Audit-Track: agent\nAudit-Scope: workspace\n"
        'Audit-Entry: "bad id\\u0085"\nAudit-Outcome: allowed\nAudit-Source: filemem\n'
        'Audit-Text: "\u00e9"\n')
    assert auditlog.parse_rows(auditlog.commit_message("s", "", made)) == made


@pytest.mark.parametrize("count", [3, 200])  # below and above gitindex._BULK
def test_set_many_makes_the_index_set_one_by_one_makes_and_git_agrees(
        count: int, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name in ("a.txt", "m/old.md", "z.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{name}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    (root / "later.txt").write_text("later\n")
    git(root, "add", "-N", "later.txt")  # an extended entry: index version 3
    files = [f"m/{i:03d}/{(i * 7919) % 1000:03d}.md" for i in range(count)] + ["a.txt"]
    changes = []
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        data = f"new {name}\n".encode()
        (root / name).write_bytes(data)
        changes.append((name, hash_blob(data), os.stat(root / name)))
    one = GitIndex.load(str(root / ".git"))
    for name, sha, stat in changes:
        one.set(name, sha, stat)
    many = GitIndex.load(str(root / ".git"))
    many.set_many(iter(changes))
    assert (many.entries, many._keys, many._values, many._extended) == (
        one.entries, one._keys, one._values, one._extended)
    many.write()
    git(root, "add", "-A", "--", ":!later.txt")
    status = git(root, "status", "--porcelain").splitlines()
    assert sorted(status) == sorted([f"A  {n}" for n in files if n != "a.txt"] + [
        "M  a.txt", " A later.txt"])


def _rebuilt_layers(state: State) -> dict[tuple[str, str], list[str]]:
    fresh = copy.copy(state)
    fresh._layers = None  # rebuilt from the entries on first use
    return {k: [e.id for e in fresh.layer(*k)] for k in LAYERS}


def test_a_views_layers_carried_through_writes_are_the_layers_a_rebuild_gives(
        tmp_path: Path) -> None:
    """evolve copies only the layers a write changed: after adds in every layer, replaces,
    removes and a seed, each layer lists the ids a rebuild from the entries lists, in the
    same order (and the layers were carried, not rebuilt)."""
    p = filemem.open_store(tmp_path / "s", create=True, write_policy="auto", budgets=BIG)
    w = filemem.write_context(session_id="s1", cwd="/work/proj")
    p.query({"text": "warm"})  # a view whose layers exist
    p.store.state().layer("user", "user-global")
    texts = []
    for i in range(12):
        track, scope = LAYERS[i % len(LAYERS)]
        texts.append((track, scope, f"note {i:02d} about layer {track}/{scope}"))
        p.add({"track": track, "scope": scope, "text": texts[-1][2]}, w)
        assert p.store.state()._layers is not None
    p.replace({"track": texts[1][0], "scope": texts[1][1], "match": "note 01",
               "text": "note 01 changed"}, w)
    p.remove({"track": texts[2][0], "scope": texts[2][1], "match": "note 02"}, w)
    p.seed([{"track": "agent", "scope": "workspace", "text": f"seeded {j}"}
            for j in range(70)], w)
    state = p.store.state()
    assert state._layers is not None
    carried = {k: [e.id for e in state.layer(*k)] for k in LAYERS}
    assert carried == _rebuilt_layers(state)
    assert sum(map(len, carried.values())) == len(state.entries) == 12 - 1 + 70
    assert "note 01 changed" in [e.text for e in state.layer(texts[1][0], texts[1][1])]
    p.close()


@pytest.mark.parametrize("kept", [4096, 3])
def test_trees_spliced_from_kept_entries_are_the_trees_git_would_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int) -> None:
    """A write's trees start from the entries of trees recent writes made, in any layer,
    kept up to a bound (3: nearly every kept tree dropped again): whichever, each commit's
    trees are canonical (git reads HEAD into an index and writes the same tree back) and
    hold exactly the store's entries."""
    from filemem.files import gitrepo

    monkeypatch.setattr(gitrepo, "_ENTRIES_KEPT", kept)
    root = tmp_path / "s"
    p = filemem.open_store(root, create=True, write_policy="auto", budgets=BIG)
    w = filemem.write_context(session_id="s1", cwd="/work/proj")
    for i in range(16):
        track, scope = LAYERS[(i * 3) % len(LAYERS)]
        p.add({"track": track, "scope": scope, "text": f"note {i:02d}"}, w)
        if i % 5 == 4:
            p.replace({"track": track, "scope": scope, "match": f"note {i:02d}",
                       "text": f"note {i:02d} again"}, w)
        if i % 7 == 6:
            p.remove({"track": track, "scope": scope, "match": f"note {i:02d}"}, w)
    p.seed([{"track": "user", "scope": "workspace", "text": f"seeded {j}"} for j in range(9)],
           w)
    assert p.store.git._entries  # something was kept
    head_tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))  # not the store's
    git(root, "read-tree", "HEAD")
    assert git(root, "write-tree").strip() == head_tree
    monkeypatch.delenv("GIT_INDEX_FILE")
    files = sorted(line.rsplit("/", 1)[-1][:-3] for line in
                   git(root, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
                   if line.endswith(".md") and "/" in line)
    assert files == sorted(e["id"] for e in p.list_entries())
    git(root, "fsck", "--strict")
    p.close()


def test_a_long_running_provider_caches_only_the_trees_at_head(tmp_path: Path) -> None:
    """Each write replaces the trees on its path; the versions replaced leave the parsed-tree
    cache (a server that had written 1,000 times held every version of every folder)."""
    root = tmp_path / "s"
    p = filemem.open_store(root, create=True, write_policy="auto", budgets=BIG)
    w = filemem.write_context(session_id="s1", cwd="/work/proj")
    for i in range(60):
        track, scope = LAYERS[i % len(LAYERS)]
        p.add({"track": track, "scope": scope, "text": f"note {i:02d}"}, w)
        if i % 9 == 8:  # a layer emptied: its folder goes from the tree
            for e in p.list_entries():
                if (e["track"], e["scope"]) == (track, scope):
                    p.remove({"track": track, "scope": scope, "match": e["text"]}, w)
        p.query({"text": "note"})
    at_head = {line.split()[2] for line in
               git(root, "ls-tree", "-r", "-t", "HEAD").splitlines()
               if line.split()[1] == "tree"}
    at_head.add(git(root, "rev-parse", "HEAD^{tree}").strip())
    cached = set(p.store.git._trees)
    assert cached and cached <= at_head
    p.close()


def _decoded_or_error(data: bytes) -> object:
    try:
        return codec.decode(data)
    except codec.CodecError as exc:
        return ("CodecError", str(exc))


@settings(max_examples=400, deadline=None)
@given(entries(), st.integers(min_value=0), st.sampled_from(["keep", "set", "insert", "cut"]),
       st.sampled_from(list(b'"\\ \n\r0-x[]:,\xc3')))
def test_a_file_read_by_position_reads_as_the_parsers_read_it(
        entry: Entry, at: int, how: str, byte: int) -> None:
    """A file exactly as filemem writes it is read by position and proved by encoding it
    again (codec._as_written); that file, or one with a byte changed, added or cut
    anywhere, decodes to the same entry (or fails with the same error) as the parsers
    alone give."""
    data = bytearray(codec.encode(entry))
    at %= len(data)
    if how == "set":
        data[at] = byte
    elif how == "insert":
        data.insert(at, byte)
    elif how == "cut":
        del data[at]
    fast = _decoded_or_error(bytes(data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(codec, "_as_written", lambda data: None)
        assert fast == _decoded_or_error(bytes(data))
    if how == "keep":
        assert codec._as_written(bytes(data)) == entry


_NAMES = ["a", "a.md", "a-", "a0", "ab", "b.md"]
_PATHS = [f"{top}/{name}" for top in ("x", "x.y", "x-y") for name in _NAMES] + \
    ["x0", "x.z", "w/x/a", "w/x.y/a", "w/x-y", "w/x0"]


def _git_order(tree: dict[str, tuple[int, str]]) -> bytes:
    """A tree's bytes as git writes them: by name, a folder's as if it ended in ``/``."""
    items = sorted(tree.items(), key=lambda kv: kv[0].encode() + (b"/" if kv[1][0] == 0o40000
                                                                   else b""))
    return b"".join(b"%o %s\0%s" % (mode, name.encode(), bytes.fromhex(sha))
                    for name, (mode, sha) in items)


@settings(max_examples=60, deadline=None)
@example([{"x/a": None, "x.y/a": b""}, {"x/a": b"", "x.y/a": None}])  # a tree made again
@given(st.lists(st.dictionaries(st.sampled_from(_PATHS),
                                st.one_of(st.none(), st.binary(max_size=6)),
                                min_size=1, max_size=8),
                min_size=1, max_size=10))
def test_every_spliced_tree_is_in_gits_order(batches: list[dict[str, bytes | None]]) -> None:
    """Trees a write splices keep their entries in git's order from one write to the next
    (a folder sorts as ``name/``: after ``x-y`` and ``x.y``, before ``x0``); new names go
    into their places. Each tree made is byte for byte what sorting it whole gives."""
    import subprocess
    import tempfile

    from filemem.files import treebytes
    from filemem.files.gitrepo import GitRepo, PendingObjects

    few = treebytes._FEW
    try:
        for treebytes._FEW in (few, 0):  # new names put in one by one, or all sorted again
            with tempfile.TemporaryDirectory() as root:
                subprocess.run(["git", "init", "-q", root], check=True)
                repo = GitRepo(root)
                tree: str | None = None
                for batch in batches:
                    pending = PendingObjects()
                    if tree is None and all(v is None for v in batch.values()):
                        continue  # nothing to delete from an empty tree
                    tree, _ = repo.splice(tree, batch, pending)
                    repo.write(pending)  # a tree the cache let go of is read back from git
                    made = {sha: raw for sha, (kind, raw) in pending.items.items()
                            if kind == b"tree"}
                    for sha, raw in made.items():
                        assert raw == _git_order(repo.read_tree(sha)), sha
    finally:
        treebytes._FEW = few


def test_an_approved_write_on_the_view_it_was_resolved_on_searches_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replace or remove finds its entry before anyone is asked, and again under the
    lock; where HEAD did not move in between it is the same view, and the layer is not
    searched a second time. Where it moved (another write meanwhile), it is."""
    from filemem.rules import matching

    p = filemem.open_store(tmp_path / "s", create=True, write_policy="auto", budgets=BIG)
    w = filemem.write_context(session_id="s1", cwd="/work/proj")
    for i in range(5):
        p.add({"track": "user", "scope": "user-global", "text": f"note {i}"}, w)
    searched: list[str] = []
    real = matching.candidates

    def counting(entries: Any, match: str, *args: Any) -> list[Any]:
        searched.append(match)
        return real(entries, match, *args)

    monkeypatch.setattr(matching, "candidates", counting)
    p.replace({"track": "user", "scope": "user-global", "match": "note 1", "text": "one"}, w)
    p.remove({"track": "user", "scope": "user-global", "match": "note 2"}, w)
    assert searched == ["note 1", "note 2"]

    other = filemem.open_store(tmp_path / "s", write_policy="auto", budgets=BIG)
    asked: list[str] = []

    def gate(request: filemem.ApprovalRequest) -> str:  # another write lands meanwhile
        asked.append(request.title)
        other.add({"track": "user", "scope": "user-global", "text": "meanwhile"}, w)
        return "allowed-once"

    q = filemem.open_store(tmp_path / "s", write_policy="ask", gate=gate, budgets=BIG)
    searched.clear()
    q.remove({"track": "user", "scope": "user-global", "match": "note 3"}, w)
    assert len(asked) == 1 and searched == ["note 3", "note 3"]
    assert "note 3" not in [e["text"] for e in q.list_entries()]
    for x in (p, other, q):
        x.close()
