"""auditList through `filemem bridge` is byte for byte what the in-process auditList gives,
encoded as the bridge encodes every message, though the bridge sends it from each row's JSON
made once and kept: checked over a store with a seed's many rows in one commit, read-side
ledger rows between commits, commits made outside filemem, hand-made trailers out of seq
order, texts with line separators, quotes and non-ASCII, and a lone surrogate (the bridge's
ASCII fallback); and after `filemem redact` run by another process while the bridge (and an
in-process provider) had the old rows cached: the redacted text never comes back. The walk
of the history kept between calls is checked against the plain merge through every move of
HEAD, and threads encoding the same rows at once against one thread's answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner.redaction import MARKER
from filemem.types import AuditRow
from tests.conftest import BIG, assert_clean_repo, ctx, git, run_cli
from tests.test_bridge import BridgeProc

UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
SECRET = "ghp_AuditCacheSecret0123456789abcdef"
LIMITS = [1, 2, 3, 5, 8, 13, 40, 100, 10_000]


def wire_line(rid: Any, rows: list[AuditRow]) -> bytes:
    """The line the bridge has always sent for a result: compact JSON, not ASCII-escaped but
    with U+2028/2029 escaped, or all ASCII when a lone surrogate cannot be UTF-8."""
    msg = {"jsonrpc": "2.0", "id": rid, "result": rows}
    line = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
    line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    try:
        return line.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(msg, separators=(",", ":")).encode("ascii") + b"\n"


def merged(p: filemem.Provider, limit: int) -> list[AuditRow]:
    """The straightforward merge auditList is defined by: every row of the commits walked
    newest first until they hold ``limit`` rows, and the ledger's newest ``limit``, sorted
    newest first by seq (stable), the first ``limit`` of them."""
    store = p.store
    rows: list[AuditRow] = []
    head = store.git.head()
    if head is not None:
        for info in store.git.newest_first(head):
            if len(rows) >= limit:
                break
            rows.extend(store.trail.commit_rows(info))
    rows.extend(store.ledger.tail(limit))
    rows.sort(key=lambda r: r["seq"], reverse=True)
    return [r.copy() for r in rows[:limit]]


def check_limits(p: filemem.Provider, limits: list[int]) -> None:
    for limit in limits:
        want = merged(p, limit)
        assert p.audit_list(limit) == want, limit
        assert p.audit_list_json(limit) == json.dumps(
            want, ensure_ascii=False, separators=(",", ":")), limit


def in_process(store: Path, limit: int) -> list[AuditRow]:
    """auditList of a provider opened now: nothing cached from before."""
    with filemem.open_store(store) as p:
        return p.audit_list(limit)


def hand_made_commit(store: Path, rows: list[tuple[int, str]]) -> None:
    """A commit made with git whose audit trailers are in the order given (filemem writes
    them in seq order; a person or another tool may not)."""
    seq0 = int(in_process(store, 1)[0]["seq"])
    trailers = []
    for offset, text in rows:
        trailers += [f"Audit-Seq: {seq0 + offset}", f"Audit-Ts: {(seq0 + offset) // 1024}",
                     "Audit-Action: add", "Audit-Source: hand", f"Audit-Text: {text}"]
    git(store, "commit", "--allow-empty", "-q", "-m", "hand-made\n\n" + "\n".join(trailers))


@pytest.fixture
def mixed_store(tmp_path: Path) -> Iterator[Path]:
    """A store whose audit trail holds every kind of row and order auditList merges."""
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto", budgets=BIG) as p:
        p.seed([{**UW, "text": f"seeded fact {i}: \"quoted\" \\ back é \U0001f600"}
                for i in range(30)], ctx())
        for i in range(4):
            p.add({**UG, "text": f"fact {i} with a line\u2028separator and\u2029another"},
                  ctx(session_id=f"s{i}"))
            p.query({"text": "fact"}, {"sessionId": f"s{i}"})  # a ledger row between commits
        p.snapshot(ctx(session_id="snap"))
    git(store, "commit", "--allow-empty", "-q", "-m", "a person's own commit")
    # newest first these read 4, 3, 2, 1, 5: the newest row is the commit's last
    hand_made_commit(store, [(5000, '"fifth"'), (1000, '"first"'), (2000, '"second"'),
                             (3000, '"third"'), (4000, '"fourth"')])
    with filemem.open_store(store, write_policy="auto", budgets=BIG) as p:
        p.add({**UG, "text": "after the hand-made commit"}, ctx())
        p.query({"text": "after"}, {"sessionId": "late"})
    with filemem.open_store(store, write_policy="off") as p, \
            pytest.raises(filemem.ProtocolError):  # a denied write is a commit too
        p.add({**UG, "text": "refused"}, ctx())
    yield store


def test_the_fast_merge_is_the_straightforward_one(mixed_store: Path) -> None:
    with filemem.open_store(mixed_store, write_policy="auto", budgets=BIG) as p:
        everything = p.audit_list(10_000)
        assert len(everything) > 40
        assert {r["action"] for r in everything} == {
            "init", "seed", "add", "recalled", "snapshot", "external-commit", "add-denied"}
        hand = [r["text"] for r in everything if r["source"] == "hand"]
        assert hand == ["fifth", "fourth", "third", "second", "first"]
        assert [r["seq"] for r in everything] == sorted((r["seq"] for r in everything),
                                                        reverse=True)
        check_limits(p, [*range(1, len(everything) + 3), 10_000])
        # a seed of more rows than asked for, newest: only its first rows are read
        p.seed([{**UW, "text": f"second seed {i}"} for i in range(150)], ctx())
        check_limits(p, [1, 2, 99, 100, 101, 150, 151, 152, 10_000])
        # the rows handed out are copies: changing one changes nothing kept
        p.audit_list(5)[0]["text"] = "changed by the caller"
        assert p.audit_list(5) == merged(p, 5)


def test_the_kept_walk_follows_every_move_of_head(
        mixed_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One provider stays open (its walk of the history kept between calls) while HEAD
    moves every way: writes on top, a person's commit, an amend, a merge, a reset."""
    from filemem.store import auditwalk

    monkeypatch.setattr(auditwalk, "KEPT_ROWS", 12)  # the bound, reached within the test
    limits = [1, 2, 11, 12, 13, 30, 10_000]
    with filemem.open_store(mixed_store, write_policy="auto", budgets=BIG) as p:
        check_limits(p, limits)
        for i in range(15):  # each on top of the HEAD last read
            p.add({**UG, "text": f"on top {i}"}, ctx())
            check_limits(p, limits)
        p.add({**UG, "text": "one more on top"}, ctx())
        assert p.audit_list(1)[0]["text"] == "one more on top"
        walk = p.store.trail._walk  # bounded: the commits holding the newest 12 rows, no more
        assert walk._rows - len(walk._blocks[-1].rows) < 12 <= walk._rows
        git(mixed_store, "commit", "--allow-empty", "-q", "-m", "a person's commit on top")
        check_limits(p, limits)
        git(mixed_store, "commit", "--amend", "--allow-empty", "-q", "-m", "amended")
        check_limits(p, limits)
        side = git(mixed_store, "commit-tree", "HEAD~3^{tree}", "-p", "HEAD~3", "-m",
                   "side").strip()
        merge = git(mixed_store, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-p", side,
                    "-m", "merge").strip()
        git(mixed_store, "update-ref", "refs/heads/main", merge)
        check_limits(p, limits)
        assert p.audit_list(1)[0]["text"] == "merge"
        p.add({**UG, "text": "after the merge"}, ctx())
        check_limits(p, limits)
        git(mixed_store, "reset", "-q", "--hard", "HEAD~2")
        check_limits(p, limits)
        assert "after the merge" not in [r["text"] for r in p.audit_list(10_000)]
    assert_clean_repo(mixed_store)


def test_bridge_bytes_are_the_in_process_rows_encoded(mixed_store: Path) -> None:
    b = BridgeProc(mixed_store, "--approval", "auto")
    try:
        for limit in LIMITS:
            for rid in (7, 2**62, "id é \u2028 \U0001f600 \"q\""):
                b.send({"jsonrpc": "2.0", "id": rid, "method": "auditList",
                        "params": {"limit": limit}})
                b.answer(rid)
                assert b.raw[-1] == wire_line(rid, in_process(mixed_store, limit)), (limit, rid)
        b.call("auditList")  # no limit: 100
        assert b.raw[-1] == wire_line(json.loads(b.raw[-1])["id"], in_process(mixed_store, 100))
        assert b"\xe2\x80\xa8" not in b"".join(b.raw)  # U+2028 is escaped on the wire
        assert b.finish() == 0
    finally:
        b.kill()


def test_a_lone_surrogate_row_falls_back_to_ascii_as_before(mixed_store: Path) -> None:
    hand_made_commit(mixed_store, [(1000, '"lone \\ud800 surrogate"')])
    with filemem.open_store(mixed_store, write_policy="auto") as p:
        p.add({**UG, "text": "newer than the lone surrogate é"}, ctx())
    b = BridgeProc(mixed_store, "--approval", "auto")
    try:
        for limit in (1, 2, 100):
            b.call("auditList", {"limit": limit})
            line = b.raw[-1]
            assert line == wire_line(json.loads(line)["id"], in_process(mixed_store, limit))
            assert line.isascii() == (limit > 1), limit  # the surrogate is the second row
        assert "lone \ud800 surrogate" in [r["text"] for r in in_process(mixed_store, 2)]
        assert b.finish() == 0
    finally:
        b.kill()


def test_a_redaction_by_another_process_leaves_nothing_cached(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto", budgets=BIG) as p:
        p.seed([{**UW, "text": f"seeded {i}"} for i in range(20)], ctx())
        p.add({**UG, "text": f"The CI token is {SECRET}, do not share"}, ctx())
        p.query({"text": SECRET}, {"sessionId": "s1"})  # the ledger holds it too
        p.add({**UG, "text": "Uses Python 3.11"}, ctx())
    b = BridgeProc(store, "--approval", "auto")
    kept = filemem.open_store(store)  # an in-process provider that stays open
    try:
        before = b.result("auditList", {"limit": 100})
        assert SECRET.encode() in b.raw[-1]
        assert any(SECRET in str(r["text"]) for r in before if r["action"] == "recalled")
        assert SECRET in kept.audit_list_json(100)

        done = run_cli("redact", "--text", SECRET, "--yes", "--json", store=store)
        assert done.returncode == 0, done.stderr

        for limit in (1, 3, 100):
            b.call("auditList", {"limit": limit})
            line = b.raw[-1]
            assert SECRET.encode() not in line
            assert line == wire_line(json.loads(line)["id"], in_process(store, limit))
            text = kept.audit_list_json(limit)
            assert SECRET not in text
            assert text == json.dumps(in_process(store, limit), ensure_ascii=False,
                                      separators=(",", ":"))
        rows = in_process(store, 100)
        assert rows[0]["action"] == "redact"
        assert sum(MARKER in str(r["text"]) for r in rows) >= 2  # the add and the recall
        assert b.finish() == 0
    finally:
        kept.close()
        b.kill()
    assert_clean_repo(store)


def test_a_redaction_in_this_process_keeps_no_old_row_in_memory(tmp_path: Path) -> None:
    from filemem.owner import redact

    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto", budgets=BIG) as p:
        p.add({**UG, "text": f"The CI token is {SECRET}, do not share"}, ctx())
        p.query({"text": SECRET}, {"sessionId": "s1"})
        p.add({**UG, "text": "Uses Python 3.11"}, ctx())
        assert SECRET in p.audit_list_json(100)
        redact.apply(p.store, text=SECRET)
        trail = p.store.trail
        kept = [r for block in trail._rows.values() for r in block.rows] + \
            [block.rows[0] for block in trail.ledger._known.values()]
        assert SECRET not in repr(kept)
        git_repo = p.store.git  # nor the commits and trees parsed before it
        assert SECRET not in repr(list(git_repo._commits.values()))
        text = p.audit_list_json(100)
        assert SECRET not in text and MARKER in text
        assert text == json.dumps(in_process(store, 100), ensure_ascii=False,
                                  separators=(",", ":"))


def test_threads_encoding_the_same_rows_at_once_agree(tmp_path: Path) -> None:
    """Rows are encoded when first asked for: threads asking at once (an MCP server's worker
    threads) must each get exactly the one-thread answer."""
    import sys
    import threading

    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto", budgets=BIG) as p:
        p.seed([{**UW, "text": f"seeded {i} é"} for i in range(400)], ctx())
    want = {n: json.dumps(in_process(store, n), ensure_ascii=False, separators=(",", ":"))
            for n in (1, 50, 399, 400)}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as Python allows
    try:
        for _ in range(5):
            with filemem.open_store(store) as p:  # nothing encoded yet
                got: list[tuple[int, str]] = []
                start = threading.Barrier(8)

                def ask(n: int, p: filemem.Provider = p, start: Any = start,
                        got: list[tuple[int, str]] = got) -> None:
                    start.wait()
                    got.append((n, p.audit_list_json(n)))

                threads = [threading.Thread(target=ask, args=(n,))
                           for n in (400, 399, 50, 1) * 2]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                assert len(got) == 8 and all(text == want[n] for n, text in got)
    finally:
        sys.setswitchinterval(old)
