"""Query: matching, the limit clamp, ranking, recall counting, visible sets and
``recalled`` rows; and which reads never bump recall counters (filemem choice 14)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import BIG, assert_clean_repo, ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
AG = {"track": "agent", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}


def found(result: dict[str, Any]) -> list[str]:
    return [e["text"] for e in result["entries"]]


def counts(p: filemem.Provider) -> dict[str, int]:
    return {e["text"]: e["recallCount"] for e in p.list_entries()}


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def rank_key(e: dict[str, Any]) -> tuple[int, int, str]:
    return (-e["recallCount"], -e["updatedAt"], e["id"])


@pytest.fixture
def big(make_provider: MakeProvider) -> filemem.Provider:
    """A store with 1005 agent/workspace entries ``fact 0`` .. ``fact 1004``."""
    p = make_provider(budgets=BIG)
    p.seed([{**AW, "text": f"fact {i}"} for i in range(1000)], ctx())  # at most 1000 a seed
    p.seed([{**AW, "text": f"fact {i}"} for i in range(1000, 1005)], ctx())
    return p


# ---------------------------------------------------------------- matching


def test_ascii_case_is_folded(provider: filemem.Provider) -> None:
    provider.add({**AW, "text": "Project convention: TDD"}, ctx())
    provider.add({**UG, "text": "prefers CHINESE replies"}, ctx())
    for needle in ("project", "PROJECT", "pRoJeCt CONVENTION: tdd"):
        assert found(provider.query({"text": needle})) == ["Project convention: TDD"]
    assert found(provider.query({"text": "chinese"})) == ["prefers CHINESE replies"]


def test_non_ascii_letters_keep_their_case(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "Café au lait"}, ctx())
    assert provider.query({"text": "CAFÉ"})["total"] == 0
    assert found(provider.query({"text": "CAFé"})) == ["Café au lait"]
    assert found(provider.query({"text": "café"})) == ["Café au lait"]
    provider.add({**UG, "text": "ÉCOLE"}, ctx())
    assert provider.query({"text": "école"})["total"] == 0
    assert found(provider.query({"text": "École"})) == ["ÉCOLE"]  # É as is, "cole" folded


def test_cjk_and_literal_substrings(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "偏好中文回复"}, ctx())
    provider.add({**AW, "text": "测试先于实现"}, ctx())
    provider.add({**AW, "text": "100% of_the time"}, ctx())
    assert found(provider.query({"text": "中文"})) == ["偏好中文回复"]
    assert found(provider.query({"text": "先于"})) == ["测试先于实现"]
    assert provider.query({"text": "中 文"})["total"] == 0
    assert found(provider.query({"text": "0% of_"})) == ["100% of_the time"]
    assert provider.query({"text": "%%"})["total"] == 0
    assert provider.query({"text": "of%the"})["total"] == 0


def test_empty_or_non_string_text_is_no_filter(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "a"}, ctx())
    provider.add({**AW, "text": "b"}, ctx())
    for filt in ({}, {"text": ""}, {"text": None}, {"text": 5}):
        assert provider.query(filt)["total"] == 2, filt
    assert provider.query()["total"] == 2
    assert provider.query(None, None)["total"] == 2


def test_track_and_scope_filters(provider: filemem.Provider) -> None:
    for layer in (UG, UW, AG, AW):
        provider.add({**layer, "text": f"{layer['track']} {layer['scope']}"}, ctx())
    assert found(provider.query({"track": "user", "scope": "workspace"})) == ["user workspace"]
    assert sorted(found(provider.query({"track": "agent"}))) == \
        ["agent user-global", "agent workspace"]
    assert sorted(found(provider.query({"scope": "user-global"}))) == \
        ["agent user-global", "user user-global"]
    # not validated: an unknown value just finds nothing
    for filt in ({"track": "team"}, {"scope": "global"}, {"track": "team", "scope": "global"},
                 {"track": "User", "scope": "workspace"}):
        assert provider.query(filt) == {"entries": [], "total": 0, "truncated": False}


# ---------------------------------------------------------------- the limit


@pytest.mark.parametrize(("limit", "size"), [
    (None, 20), (0, 20), (-1, 20), (-5000, 20), (2.5, 20), (3.0, 3), ("x", 20), ("50", 20),
    (True, 20), (1, 1), (3, 3), (999, 999), (1000, 1000), (1001, 1000), (5000, 1000),
])
def test_limit_is_clamped(big: filemem.Provider, limit: Any, size: int) -> None:
    filt = {} if limit is None else {"limit": limit}
    out = big.query(filt)
    assert len(out["entries"]) == size
    assert out["total"] == 1005
    assert out["truncated"] is True


def test_total_counts_every_match_and_truncated_is_exact(provider: filemem.Provider) -> None:
    provider.seed([{**AW, "text": f"fact {i}"} for i in range(5)], ctx())
    out = provider.query({"limit": 3})
    assert (len(out["entries"]), out["total"], out["truncated"]) == (3, 5, True)
    out = provider.query({"limit": 5})
    assert (len(out["entries"]), out["total"], out["truncated"]) == (5, 5, False)
    out = provider.query({"text": "fact 1"})
    assert (found(out), out["total"], out["truncated"]) == (["fact 1"], 1, False)


# ---------------------------------------------------------------- ranking and recall counts


def test_ties_are_broken_by_updated_at_then_id(provider: filemem.Provider) -> None:
    """Entries adopted together from hand-written files share one updatedAt (a seed gives
    its entries consecutive milliseconds), so only the id can order them."""
    from filemem.owner import handedits

    folder = Path(provider.path) / "user" / "user-global" / "_shared"
    folder.mkdir(parents=True)
    for i in range(12):
        (folder / f"note-{i}.md").write_text(f"same time {i}")
    handedits.adopt(provider.store)
    entries = provider.list_entries()
    assert len(entries) == 12 and len({e["updatedAt"] for e in entries}) == 1
    got = provider.query({"limit": 100})["entries"]
    assert [e["id"] for e in got] == sorted(e["id"] for e in entries)


def test_order_is_recall_count_then_updated_at_then_id(provider: filemem.Provider) -> None:
    provider.seed([{**AW, "text": f"old {i}"} for i in range(4)], ctx())
    provider.add({**AW, "text": "newer"}, ctx())
    provider.add({**AW, "text": "newest"}, ctx())
    provider.replace({**AW, "match": "old 2", "text": "old 2 touched"}, ctx())
    provider.query({"text": "old 3"})
    provider.query({"text": "old 3"})
    provider.query({"text": "old 1"})
    entries = provider.list_entries()
    expected = [e["text"] for e in sorted(entries, key=rank_key)]
    got = provider.query({"limit": 100})["entries"]
    assert [e["text"] for e in got] == expected
    assert expected[:2] == ["old 3", "old 1"]
    by_text = {e["text"]: e for e in entries}
    assert by_text["old 2 touched"]["updatedAt"] >= by_text["newest"]["updatedAt"] >= \
        by_text["newer"]["updatedAt"] >= by_text["old 0"]["updatedAt"]


def test_query_returns_pre_bump_values_and_bumps_the_page(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "alpha fact"}, ctx())
    provider.add({**UG, "text": "beta fact"}, ctx())
    before = {e["text"]: e for e in provider.list_entries()}
    first = provider.query({"text": "alpha"})["entries"]
    assert [(e["text"], e["recallCount"], e["lastRecalled"]) for e in first] == \
        [("alpha fact", 0, None)]
    second = provider.query({"text": "fact"})["entries"]
    assert [(e["text"], e["recallCount"]) for e in second] == [("alpha fact", 1),
                                                              ("beta fact", 0)]
    after = {e["text"]: e for e in provider.list_entries()}
    assert (after["alpha fact"]["recallCount"], after["beta fact"]["recallCount"]) == (2, 1)
    assert second[0]["lastRecalled"] is not None
    assert after["alpha fact"]["lastRecalled"] >= second[0]["lastRecalled"]
    assert isinstance(after["beta fact"]["lastRecalled"], int)
    for text in before:  # a recall bump is not an update
        assert after[text]["updatedAt"] == before[text]["updatedAt"]
        assert after[text]["version"] == before[text]["version"]


def test_only_the_returned_page_is_bumped(provider: filemem.Provider) -> None:
    provider.seed([{**AW, "text": f"item {i}"} for i in range(5)], ctx())
    page = provider.query({"limit": 2})["entries"]
    bumped = {e["text"] for e in page}
    assert counts(provider) == {f"item {i}": int(f"item {i}" in bumped) for i in range(5)}
    provider.query({"text": "no such thing"})
    assert sum(counts(provider).values()) == 2


def test_recall_counts_are_shared_between_providers(make_provider: MakeProvider,
                                                    store_path: Path) -> None:
    a = make_provider()
    a.seed([{**UG, "text": "one"}, {**UG, "text": "two"}], ctx())
    a.query({"text": "two"})
    b = make_provider()
    assert counts(b) == {"one": 0, "two": 1}
    assert found(b.query({})) == ["two", "one"]
    assert counts(a) == {"one": 1, "two": 2}
    assert_clean_repo(store_path)


def test_query_never_commits(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    h = head(store_path)
    provider.query({"text": "x"}, {"sessionId": "s1"})
    provider.query({})
    assert head(store_path) == h
    assert_clean_repo(store_path)


def test_listing_views_never_bump(provider: filemem.Provider) -> None:
    # filemem choice 14
    provider.add({**UG, "text": "listed"}, ctx())
    provider.add({**AW, "text": "also listed"}, ctx())
    for _ in range(2):
        provider.list_entries()
        provider.listEntries()
        provider.export()
        provider.budgets()
        provider.snapshot({"id": "snap", "header": {"cwd": "/work/proj"}})
        provider.audit_list(10)
    assert all(e["recallCount"] == 0 and e["lastRecalled"] is None
               for e in provider.list_entries())
    assert all(e["recallCount"] == 0 for e in provider.export()["entries"])


# ---------------------------------------------------------------- visible sets


@pytest.fixture
def layered(provider: filemem.Provider) -> filemem.Provider:
    provider.add({**UG, "text": "ug shared"}, ctx(cwd="/w/a"))
    provider.add({**UG, "text": "ug coder"}, ctx(cwd="/w/a", agent="coder"))
    provider.add({**UG, "text": "ug reviewer"}, ctx(cwd="/w/b", agent="reviewer"))
    provider.add({**AW, "text": "ws-a shared"}, ctx(cwd="/w/a"))
    provider.add({**AW, "text": "ws-a coder"}, ctx(cwd="/w/a", agent="coder"))
    provider.add({**AW, "text": "ws-b shared"}, ctx(cwd="/w/b"))
    provider.add({**AW, "text": "ws-b coder"}, ctx(cwd="/w/b", agent="coder"))
    provider.add({**AW, "text": "ws-a reviewer"}, ctx(cwd="/w/a", agent="reviewer"))
    return provider


ALL = {"ug shared", "ug coder", "ug reviewer", "ws-a shared", "ws-a coder", "ws-b shared",
       "ws-b coder", "ws-a reviewer"}


def session(cwd: str | None, agent: str | None, sid: str = "q1") -> dict[str, Any]:
    return ctx(sid, cwd, agent)["agent"]["session"]


@pytest.mark.parametrize(("opts", "want"), [
    ({}, ALL),
    ({"sessionId": "q1"}, ALL),
    ({"session": session("/w/a", "coder")}, {"ug shared", "ug coder", "ws-a shared",
                                              "ws-a coder"}),
    ({"session": session("/w/b", "coder")}, {"ug shared", "ug coder", "ws-b shared",
                                              "ws-b coder"}),
    ({"session": session("/w/a", None)}, {"ug shared", "ws-a shared"}),
    ({"session": session("/w/c", "nobody")}, {"ug shared"}),
    ({"session": session("/w/a/./", "reviewer")}, {"ug shared", "ug reviewer", "ws-a shared",
                                                   "ws-a reviewer"}),
    ({"agentKey": "coder"}, {"ug shared", "ug coder", "ws-a shared", "ws-a coder",
                             "ws-b shared", "ws-b coder"}),
    ({"agentKey": ""}, {"ug shared", "ws-a shared", "ws-b shared"}),
    ({"agentKey": "unknown"}, {"ug shared", "ws-a shared", "ws-b shared"}),
])
def test_session_queries_see_their_visible_set(layered: filemem.Provider, opts: dict[str, Any],
                                               want: set[str]) -> None:
    # filemem choice 2
    out = layered.query({"limit": 100}, opts)
    assert set(found(out)) == want
    assert out["total"] == len(want)
    hidden = ALL - want
    assert all(counts(layered)[t] == 0 for t in hidden)  # invisible entries are not bumped


def test_visible_set_applies_with_text_and_layer_filters(layered: filemem.Provider) -> None:
    opts = {"session": session("/w/a", "coder")}
    assert set(found(layered.query({"text": "CODER"}, opts))) == {"ug coder", "ws-a coder"}
    assert found(layered.query({"track": "agent", "scope": "workspace", "text": "ws-b"},
                               opts)) == []
    assert set(found(layered.query({"scope": "user-global"}, opts))) == {"ug shared",
                                                                        "ug coder"}


# ---------------------------------------------------------------- recalled rows


def recalled_rows(p: filemem.Provider) -> list[dict[str, Any]]:
    return [r for r in p.audit_list(100) if r["action"] == "recalled"]


def test_recalled_row_fields(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "hit me"}, ctx())
    provider.query({"track": "user", "scope": "user-global", "text": "hit"},
                   {"sessionId": "sess-1"})
    row = provider.audit_list(1)[0]
    assert row["action"] == "recalled"
    assert {k: row[k] for k in ("track", "scope", "entryId", "text", "outcome", "source",
                                "sessionId")} == {
        "track": "user", "scope": "user-global", "entryId": None, "text": "hit",
        "outcome": "ok", "source": "filemem", "sessionId": "sess-1"}
    assert isinstance(row["seq"], int) and isinstance(row["ts"], int)


@pytest.mark.parametrize(("filt", "track", "scope", "text"), [
    ({}, None, None, None),
    ({"text": ""}, None, None, ""),
    ({"text": "zero hits here"}, None, None, "zero hits here"),
    ({"track": "agent"}, "agent", None, None),
    ({"scope": "workspace", "text": 7}, None, "workspace", None),
])
def test_recalled_row_even_with_zero_hits(provider: filemem.Provider, filt: dict[str, Any],
                                          track: str | None, scope: str | None,
                                          text: str | None) -> None:
    out = provider.query(filt, {"sessionId": "s-zero"})
    assert out["total"] == 0
    rows = recalled_rows(provider)
    assert len(rows) == 1
    assert (rows[0]["track"], rows[0]["scope"], rows[0]["text"], rows[0]["sessionId"]) == \
        (track, scope, text, "s-zero")


def test_no_session_id_no_recalled_row(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    provider.query({"text": "x"})
    provider.query({"text": "x"}, {"agentKey": "coder"})
    provider.query({"text": "x"}, {"session": session("/w/a", "coder")})
    assert recalled_rows(provider) == []
    provider.query({"text": "x"}, {"sessionId": None})
    rows = recalled_rows(provider)
    assert len(rows) == 1 and rows[0]["sessionId"] is None


def test_one_recalled_row_per_query_newest_first(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    for i in range(3):
        provider.query({"text": f"q{i}"}, {"sessionId": f"s{i}"})
    rows = recalled_rows(provider)
    assert [r["text"] for r in rows] == ["q2", "q1", "q0"]
    assert [r["sessionId"] for r in rows] == ["s2", "s1", "s0"]
    assert rows[0]["seq"] > rows[1]["seq"] > rows[2]["seq"]


@pytest.mark.parametrize(("filt", "opts"), [
    ({"text": "x\ud800"}, {"sessionId": "s"}),
    ({"text": "x"}, {"sessionId": "s\udfff"}),
    ({**UG, "text": "x\ud800"}, {}),
])
def test_a_lone_surrogate_in_a_query_is_invalid_input_and_changes_nothing(
        make_provider: MakeProvider, store_path: Path, filt: dict[str, Any],
        opts: dict[str, Any]) -> None:
    p = make_provider()
    p.add({**UG, "text": "x marks the spot"}, ctx())
    ledger = store_path / ".filemem" / "audit.jsonl"
    before = ledger.read_bytes() if ledger.exists() else b""
    with pytest.raises(filemem.ProtocolError) as caught:
        p.query(filt, opts)
    assert caught.value.code == "INVALID_INPUT" and "lone surrogate" in caught.value.message
    assert counts(p) == {"x marks the spot": 0}  # no recall bump
    assert (ledger.read_bytes() if ledger.exists() else b"") == before


# ---------------------------------------------------------------- the text index


def _entry(i: int, text: str) -> Any:
    from filemem.model import Entry

    return Entry(id=f"{i:08d}-0000-4000-8000-000000000000", track="user", scope="user-global",
                 workspace_key="", agent_key="", text=text, source="t", tags=(), version=1,
                 created_at=i, updated_at=i, session_id=None)


def test_the_text_index_finds_what_a_test_of_each_entry_finds() -> None:
    """All entries' texts joined in one string (a query over the whole store) find exactly
    the entries a test of each one finds, in their order: a needle in one text or in
    many (past the few found one by one), at a text's start or end, spanning two texts
    (never a match), holding the separator (a NUL, which a text may hold too)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from filemem.rules.query import TextIndex

    alphabet = st.sampled_from(["a", "b", "ab", "\0", " ", "é", "x"])
    texts = st.lists(st.lists(alphabet, max_size=6).map("".join), max_size=80)

    @settings(max_examples=300, deadline=None)
    @given(texts, st.lists(alphabet, min_size=1, max_size=3).map("".join))
    def check(ts: list[str], needle: str) -> None:
        entries = [_entry(i, t) for i, t in enumerate(ts)]
        assert TextIndex(entries).containing(needle) == [e for e in entries if needle in e.fold]

    check()
    many = [_entry(i, f"fact {i}") for i in range(200)]
    index = TextIndex(many)
    assert index.containing("fact") == many  # every one: the rest tested one by one
    assert index.containing("fact 19") == [many[19], *many[190:200]]
    assert index.containing("9f") == []  # "…19" + "fact…" only across two texts
