"""The audit trail: ``auditList`` rows, their fields per action, their order, their schema,
their persistence, and the git commit messages they come from (``schemas/audit-trailers.md``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import filemem
from tests.conftest import ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
AUTO = "allowed-once (via approval, writePolicy auto)"
FIELDS = ["seq", "ts", "action", "track", "scope", "entryId", "text", "outcome", "source",
          "sessionId"]


def validator(schema: dict[str, Any], name: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(schema["$id"],
                                                       Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{name}"}, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def fields(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: row[k] for k in keys or FIELDS[2:]}


def rows_of(p: filemem.Provider, n: int = 1000) -> list[dict[str, Any]]:
    return p.audit_list(n)


def commit_count(path: Path) -> int:
    return int(git(path, "rev-list", "--count", "HEAD").strip())


# ---------------------------------------------------------------- order and limit


def test_newest_first_with_unique_growing_seq(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "one"}, ctx())
    provider.query({"text": "one"}, {"sessionId": "s1"})
    provider.add({**UG, "text": "two"}, ctx())
    provider.snapshot({"id": "snap-1", "header": {"cwd": "/work/proj"}})
    provider.remove({**UG, "match": "one"}, ctx())
    rows = rows_of(provider)
    assert [r["action"] for r in rows] == ["remove", "snapshot", "add", "recalled", "add",
                                           "init"]
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == len(seqs)
    ts = [r["ts"] for r in rows]
    assert ts == sorted(ts, reverse=True)
    assert all(list(r) == FIELDS for r in rows)


def test_seqs_grow_past_the_last_commits_rows_without_the_counter_in_one_millisecond(
        provider: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter remembers the seqs handed out; without it (deleted), the next rows still
    come after the last commit's last row, with the clock standing still (seq = the
    previous + 1): the floor is read from HEAD, or remembered from this process's commit."""
    from filemem.store import auditlog, transaction

    monkeypatch.setattr(transaction, "now_ms", lambda: 1_900_000_000_000)
    monkeypatch.setattr(auditlog, "now_ms", lambda: 1_900_000_000_000)
    provider.seed([{**UG, "text": f"seeded {i}"} for i in range(3)], ctx())
    (store_path / ".filemem" / "ledger.lock").unlink()
    provider.add({**UG, "text": "after the seed"}, ctx())
    (store_path / ".filemem" / "ledger.lock").unlink()
    with filemem.open_store(store_path, write_policy="auto") as other:  # reads HEAD's rows
        other.add({**UG, "text": "from another process's view"}, ctx())
    rows = rows_of(provider)
    assert [r["text"] for r in rows[:5]] == [
        "from another process's view", "after the seed", "seeded 2", "seeded 1", "seeded 0"]
    seqs = [r["seq"] for r in rows[:5]]
    assert seqs == list(range(seqs[-1] + 4, seqs[-1] - 1, -1))


def test_the_ledger_s_newest_seq_follows_appends_by_any_process(
        provider: filemem.Provider, store_path: Path) -> None:
    """The ledger's newest seq (the floor every write numbers after) is remembered while
    the file stays as it was, and read again once any process has appended to it (or a
    redaction rewrote it): with the counter gone, rows still come after the ledger's."""
    ledger = provider.store.ledger
    assert ledger.last_seq() == 0  # no ledger yet
    provider.add({**UG, "text": "tea at four"}, ctx())
    provider.snapshot({"sessionId": "s1"})
    first = ledger.last_seq()
    assert first == rows_of(provider)[0]["seq"] and ledger.last_seq() == first
    with filemem.open_store(store_path, write_policy="auto") as other:  # another process
        other.query({"text": "tea"}, {"sessionId": "s2"})
        newer = other.audit_list(1)[0]["seq"]
    assert newer > first and ledger.last_seq() == newer
    (store_path / ".filemem" / "ledger.lock").unlink()
    provider.add({**UG, "text": "after the recall"}, ctx())
    assert rows_of(provider)[0]["seq"] > newer


def test_limit(provider: filemem.Provider) -> None:
    for i in range(4):
        provider.add({**UG, "text": f"e{i}"}, ctx())
    assert [r["text"] for r in provider.audit_list(2)] == ["e3", "e2"]
    assert provider.auditList(2) == provider.audit_list(2)
    assert len(provider.audit_list(1)) == 1
    full = provider.audit_list()
    assert len(full) == 5
    for bad in (0, -1, "x", None, 2.5, True):
        assert provider.audit_list(bad) == full, bad


def test_default_limit_is_100(provider: filemem.Provider) -> None:
    provider.seed([{**UG, "text": f"s{i}"} for i in range(120)], ctx())
    assert len(provider.audit_list()) == 100
    assert len(provider.audit_list(500)) == 122  # init + seed + 120 adds


# ---------------------------------------------------------------- fields per action


def test_add_row(provider: filemem.Provider) -> None:
    e = provider.add({**AW, "text": "Prefers replies\nin Chinese", "source": "claude"},
                     ctx("sess-a"))["entry"]
    row = rows_of(provider)[0]
    assert fields(row) == {"action": "add", "track": "agent", "scope": "workspace",
                           "entryId": e["id"], "text": "Prefers replies\nin Chinese",
                           "outcome": AUTO, "source": "claude", "sessionId": "sess-a"}
    assert isinstance(row["seq"], int) and isinstance(row["ts"], int)
    assert abs(row["ts"] - e["createdAt"]) < 60_000


def test_rows_without_a_session_id(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "anonymous"}, ctx(session_id=None))
    provider.add({**UG, "text": "no session"}, {"agent": {}})
    rows = rows_of(provider, 2)
    assert [r["sessionId"] for r in rows] == [None, None]


def test_replace_row_has_new_text_and_original_source(provider: filemem.Provider) -> None:
    e = provider.add({**UG, "text": "old text", "source": "claude"}, ctx())["entry"]
    provider.replace({**UG, "match": "old", "text": "new text", "source": "memory-tool"},
                     ctx("sess-r"))
    assert fields(rows_of(provider)[0]) == {
        "action": "replace", "track": "user", "scope": "user-global", "entryId": e["id"],
        "text": "new text", "outcome": AUTO, "source": "claude", "sessionId": "sess-r"}


def test_remove_row(provider: filemem.Provider) -> None:
    e = provider.add({**AW, "text": "gone soon", "source": "mem0"}, ctx())["entry"]
    provider.remove({**AW, "match": "gone"}, ctx("sess-x"))
    assert fields(rows_of(provider)[0]) == {
        "action": "remove", "track": "agent", "scope": "workspace", "entryId": e["id"],
        "text": "gone soon", "outcome": AUTO, "source": "mem0", "sessionId": "sess-x"}


def test_consolidate_rows(provider: filemem.Provider) -> None:
    a = provider.add({**AW, "text": "frag one", "source": "claude"}, ctx())["entry"]
    b = provider.add({**AW, "text": "frag two"}, ctx())["entry"]
    out = provider.consolidate({**AW, "matches": ["one", "two"], "text": "merged",
                                "source": "memory-tool"}, ctx("sess-c"))
    rows = rows_of(provider, 3)
    common = {"track": "agent", "scope": "workspace", "outcome": AUTO, "sessionId": "sess-c"}
    assert [fields(r) for r in rows] == [
        {"action": "consolidate-add", "entryId": out["entry"]["id"], "text": "merged",
         "source": "memory-tool", **common},
        {"action": "consolidate-remove", "entryId": b["id"], "text": "frag two",
         "source": "filemem", **common},
        {"action": "consolidate-remove", "entryId": a["id"], "text": "frag one",
         "source": "claude", **common},
    ]
    assert rows[0]["seq"] > rows[1]["seq"] > rows[2]["seq"]


def test_seed_rows(provider: filemem.Provider) -> None:
    out = provider.seed([{**UG, "text": "a", "source": "claude"}, {**AW, "text": "b"}],
                        ctx("sess-s"))
    rows = rows_of(provider, 3)
    first, second = out["entries"]
    assert [fields(r) for r in rows] == [
        {"action": "add", "track": "agent", "scope": "workspace", "entryId": second["id"],
         "text": "b", "outcome": AUTO, "source": "filemem", "sessionId": "sess-s"},
        {"action": "add", "track": "user", "scope": "user-global", "entryId": first["id"],
         "text": "a", "outcome": AUTO, "source": "claude", "sessionId": "sess-s"},
        {"action": "seed", "track": None, "scope": None, "entryId": None,
         "text": "user/user-global: a\nagent/workspace: b", "outcome": AUTO,
         "source": "filemem", "sessionId": "sess-s"},
    ]


def test_import_rows_are_seed_and_add(make_provider: MakeProvider) -> None:
    src = make_provider()
    src.add({**UG, "text": "exported", "source": "claude"}, ctx())
    dst_doc = src.export()
    src.close()
    p = make_provider()
    before = len(rows_of(p))
    p.import_envelope(dst_doc, ctx("sess-i"))
    rows = rows_of(p)
    assert len(rows) == before + 2
    assert [(r["action"], r["source"], r["text"]) for r in rows[:2]] == [
        ("add", "claude", "exported"), ("seed", "filemem", "user/user-global: exported")]
    assert not any(r["action"] in ("import", "consolidate") for r in rows)


def test_denied_and_failed_rows_are_commits(make_provider: MakeProvider,
                                            store_path: Path) -> None:
    p = make_provider(write_policy="off")
    n = commit_count(store_path)
    with pytest.raises(filemem.ProtocolError):
        p.add({**UG, "text": "refused"}, ctx("sess-d"))
    assert commit_count(store_path) == n + 1
    assert fields(rows_of(p)[0]) == {
        "action": "add-denied", "track": "user", "scope": "user-global", "entryId": None,
        "text": "refused", "outcome": "rejected (via approval, writePolicy off)",
        "source": "filemem", "sessionId": "sess-d"}
    assert p.list_entries() == []


def test_read_side_rows_are_not_commits(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    n = commit_count(store_path)
    provider.query({"text": "x"}, {"sessionId": "s"})
    provider.snapshot({"id": "s", "header": {}})
    assert commit_count(store_path) == n
    assert [r["action"] for r in rows_of(provider, 2)] == ["snapshot", "recalled"]
    assert git(store_path, "status", "--porcelain") == ""


def test_reads_without_a_session_leave_no_rows(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    before = rows_of(provider)
    provider.query({"text": "x"})
    provider.list_entries()
    provider.budgets()
    provider.export()
    provider.snapshot(None)
    assert rows_of(provider) == before


# ---------------------------------------------------------------- schema and persistence


def asking(make_provider: MakeProvider) -> filemem.Provider:
    return make_provider(write_policy="ask", gate=lambda req: "allowed-once")


def exercise(p: filemem.Provider) -> None:
    """One of everything that leaves a row (``p`` asks its gate, which allows)."""
    w = ctx("sess-z", "/w/a", "coder")
    p.add({**UG, "text": "alpha\n\"quoted\" \u2028 line", "tags": ["t"]}, w)
    p.add({**AW, "text": "beta"}, w)
    p.add({**AW, "text": "gamma"}, w)
    p.replace({**UG, "match": "alpha", "text": "alpha 2"}, w)
    p.consolidate({**AW, "matches": ["beta", "gamma"], "text": "beta+gamma"}, w)
    p.seed([{**UG, "text": "s1"}, {**AW, "text": "s2"}], w)
    p.remove({**UG, "match": "s1"}, w)
    p.query({"text": "alpha"}, {"sessionId": "sess-z"})
    p.query({}, {"sessionId": None})
    p.snapshot({"id": "sess-z", "header": {"cwd": "/w/a", "agentPreset": "coder"}})
    p.snapshot({"id": "empty", "header": {"cwd": "/nowhere", "agentPreset": "x"}})
    with pytest.raises(filemem.ProtocolError):
        p.add({**UG, "text": "refused"}, {**w, "gate": lambda req: "rejected"})


def test_every_row_matches_the_schema(make_provider: MakeProvider,
                                      protocol_schema: dict[str, Any]) -> None:
    p = asking(make_provider)
    exercise(p)
    rows = rows_of(p)
    assert len(rows) >= 17
    v = validator(protocol_schema, "auditRow")
    for r in rows:
        assert [e.message for e in v.iter_errors(r)] == [], r
    assert v.is_valid({**rows[0], "seq": "1"}) is False  # the check can fail


def test_rows_survive_reopening(make_provider: MakeProvider, store_path: Path) -> None:
    p = asking(make_provider)
    exercise(p)
    rows = rows_of(p)
    p.close()
    again = filemem.open_store(store_path)
    try:
        assert rows_of(again) == rows
    finally:
        again.close()
    other = make_provider()
    assert rows_of(other) == rows


# ---------------------------------------------------------------- git commit messages


def test_commit_subjects_read_well(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "Prefers replies in Chinese"}, ctx())
    provider.replace({**UG, "match": "Chinese", "text": "Prefers replies in English"}, ctx())
    provider.remove({**UG, "match": "English"}, ctx())
    subjects = git(store_path, "log", "--format=%s").splitlines()
    assert subjects[:3] == ["remove user/user-global: Prefers replies in English",
                            "replace user/user-global: Prefers replies in English",
                            "add user/user-global: Prefers replies in Chinese"]


def test_commit_bodies_hold_full_texts(provider: filemem.Provider, store_path: Path) -> None:
    long = "line one\n" + "x" * 500 + "\nlast line"
    provider.add({**AW, "text": long}, ctx())
    body = git(store_path, "log", "-1", "--format=%B")
    assert long in body
    provider.replace({**AW, "match": "line one", "text": "short"}, ctx())
    body = git(store_path, "log", "-1", "--format=%B")
    assert long in body and "short" in body


def test_trailers_parse_back_to_the_rows(make_provider: MakeProvider, store_path: Path) -> None:
    p = asking(make_provider)
    exercise(p)
    committed = [r for r in rows_of(p) if r["action"] not in ("recalled", "snapshot")]
    fmt = "%x1e%(trailers:key=Audit-Seq,key=Audit-Action,key=Audit-Text,key=Audit-Entry)"
    out = git(store_path, "log", f"--format={fmt}")
    parsed: list[dict[str, Any]] = []
    for block in out.split("\x1e")[1:]:
        rows: list[dict[str, Any]] = []
        for line in block.strip("\n").splitlines():
            key, _, value = line.partition(": ")
            if key == "Audit-Seq":
                rows.append({"seq": int(value), "entryId": None})
            elif key == "Audit-Action":
                rows[-1]["action"] = value
            elif key == "Audit-Entry":
                rows[-1]["entryId"] = value
            elif key == "Audit-Text":
                rows[-1]["text"] = json.loads(value)
        parsed.extend(reversed(rows))  # a commit lists its rows oldest first
    assert [r["seq"] for r in parsed] == [r["seq"] for r in committed]
    assert [r["action"] for r in parsed] == [r["action"] for r in committed]
    assert [r["entryId"] for r in parsed] == [r["entryId"] for r in committed]
    assert [r["text"] for r in parsed] == [r["text"] for r in committed]
    assert "alpha\n\"quoted\" \u2028 line" in [r["text"] for r in parsed]


def test_odd_field_values_survive_the_trailers(make_provider: MakeProvider,
                                               store_path: Path) -> None:
    p = make_provider()
    odd = ["", "null", "123", ' spaced "q"\n nl ', '"starts', "tab\there", "nel\x85x",
           "u\u2028v", "Audit-Seq: 5", "ü 中文 \U0001f600"]
    for i, value in enumerate(odd):
        p.add({**UG, "text": f"t{i}\n\nAudit-Seq: 1\nAudit-Action: remove",
               "source": value or None}, ctx(session_id=value))
    rows = rows_of(p)
    assert [r["sessionId"] for r in rows[:len(odd)]] == odd[::-1]
    assert [r["source"] for r in rows[:len(odd)]] == [v or "filemem" for v in odd[::-1]]
    assert [r["action"] for r in rows] == ["add"] * len(odd) + ["init"]
    p.close()
    again = filemem.open_store(store_path)
    try:
        assert rows_of(again) == rows
    finally:
        again.close()
    actions = git(store_path, "log", "--format=%(trailers:key=Audit-Action,valueonly)")
    assert [a for a in actions.split("\n") if a] == ["add"] * len(odd) + ["init"]


def test_another_open_provider_sees_new_rows(make_provider: MakeProvider) -> None:
    reader = make_provider()
    assert [r["action"] for r in rows_of(reader)] == ["init"]
    writer = make_provider()
    writer.add({**UG, "text": "fresh"}, ctx())
    writer.query({"text": "fresh"}, {"sessionId": "s1"})
    assert [r["action"] for r in rows_of(reader)] == ["recalled", "add", "init"]
    assert rows_of(reader) == rows_of(writer)
