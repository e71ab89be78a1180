"""The 22 behaviours of the protocol's conformance suite, through the Python API.

Each test mirrors one case of the reference's conformance suite (A1..E2), with the same
write context the suite uses: session ``conformance-session`` in ``C:/conformance/ws`` with
agent preset ``conformance``, and a gate that answers ``allowed-once`` unless a case says
otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import filemem
from tests.conftest import ctx

UUID_V4 = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
)
SESSION = "conformance-session"
ENTRY_FIELDS = ("id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
                "version", "createdAt", "updatedAt", "lastRecalled", "recallCount", "sessionId")

MakeProvider = Callable[..., filemem.Provider]


def conf_ctx(gate: Any = None) -> dict[str, Any]:
    return ctx(SESSION, "C:/conformance/ws", "conformance", gate=gate)


def validator(schema: dict[str, Any], name: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(schema["$id"],
                                                       Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{name}"}, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def assert_valid_entry(e: dict[str, Any]) -> None:
    """The protocol's validateMemoryEntry rules: the 14 fields in order, each of its type."""
    assert tuple(e) == ENTRY_FIELDS
    assert UUID_V4.match(e["id"])
    assert e["track"] in ("user", "agent")
    assert e["scope"] in ("user-global", "workspace")
    assert isinstance(e["workspaceKey"], str) and isinstance(e["agentKey"], str)
    assert isinstance(e["text"], str) and e["text"]
    assert isinstance(e["source"], str) and e["source"]
    assert type(e["version"]) is int and e["version"] >= 1
    assert type(e["createdAt"]) is int and type(e["updatedAt"]) is int
    assert e["updatedAt"] >= e["createdAt"]
    assert e["lastRecalled"] is None or type(e["lastRecalled"]) is int
    assert type(e["recallCount"]) is int and e["recallCount"] >= 0
    assert e["sessionId"] is None or isinstance(e["sessionId"], str)
    assert isinstance(e["tags"], list) and all(isinstance(t, str) for t in e["tags"])


@pytest.fixture
def allow_calls() -> list[filemem.ApprovalRequest]:
    return []


@pytest.fixture
def conf(make_provider: MakeProvider,
         allow_calls: list[filemem.ApprovalRequest]) -> filemem.Provider:
    """The golden setup: every approval request is answered ``allowed-once``."""

    def gate(req: filemem.ApprovalRequest) -> str:
        allow_calls.append(req)
        return "allowed-once"

    return make_provider(write_policy="ask", gate=gate)


def expect(code: str, fn: Callable[[], Any]) -> filemem.ProtocolError:
    with pytest.raises(filemem.ProtocolError) as info:
        fn()
    assert info.value.code == code, info.value
    return info.value


def test_a1_add_returns_a_full_v1_entry(conf: filemem.Provider) -> None:
    out = conf.add({"track": "user", "scope": "user-global", "text": "Prefers concise replies",
                    "tags": ["pref", "comms"]}, conf_ctx())
    e = out["entry"]
    assert_valid_entry(e)
    assert e["track"] == "user" and e["scope"] == "user-global"
    assert e["text"] == "Prefers concise replies"
    assert e["tags"] == ["pref", "comms"]
    assert e["version"] == 1
    assert e["lastRecalled"] is None and e["recallCount"] == 0
    assert e["sessionId"] == SESSION
    assert e["source"] == "filemem"
    assert conf.list_entries() == [e]


def test_a2_unknown_track_is_invalid_input(conf: filemem.Provider) -> None:
    expect("INVALID_INPUT", lambda: conf.add(
        {"track": "team", "scope": "user-global", "text": "x"}, conf_ctx()))
    assert conf.list_entries() == []


def test_a3_unknown_scope_is_invalid_input(conf: filemem.Provider) -> None:
    expect("INVALID_INPUT", lambda: conf.add(
        {"track": "user", "scope": "global", "text": "x"}, conf_ctx()))
    assert conf.list_entries() == []


def test_a4_empty_text_is_invalid_input(conf: filemem.Provider) -> None:
    expect("INVALID_INPUT", lambda: conf.add(
        {"track": "user", "scope": "user-global", "text": ""}, conf_ctx()))
    assert conf.list_entries() == []


def test_a5_write_without_agent_requires_agent(
        conf: filemem.Provider, allow_calls: list[filemem.ApprovalRequest]) -> None:
    expect("WRITE_REQUIRES_AGENT", lambda: conf.add(
        {"track": "user", "scope": "user-global", "text": "x"}, {}))
    assert conf.list_entries() == [] and allow_calls == []


def test_a6_tags_are_normalised_and_limited(conf: filemem.Provider) -> None:
    e = conf.add({"track": "user", "scope": "user-global", "text": "t",
                  "tags": ["a ", "a", "b"]}, conf_ctx())["entry"]
    assert e["tags"] == ["a", "b"]
    for bad in (["x" * 33], [f"t{i}" for i in range(17)], ["a\x00b"]):
        expect("INVALID_INPUT", lambda bad=bad: conf.add(
            {"track": "user", "scope": "user-global", "text": "u", "tags": bad}, conf_ctx()))
    assert [x["text"] for x in conf.list_entries()] == ["t"]


def test_a7_query_finds_cjk_and_folds_ascii_case(conf: filemem.Provider) -> None:
    conf.add({"track": "agent", "scope": "workspace", "text": "Project convention: TDD"},
             conf_ctx())
    conf.add({"track": "user", "scope": "user-global", "text": "用户偏好中文回复"}, conf_ctx())
    for needle in ("project", "PROJECT", "Project convention"):
        got = conf.query({"text": needle})
        assert [e["text"] for e in got["entries"]] == ["Project convention: TDD"], needle
    got = conf.query({"text": "中文"})
    assert [e["text"] for e in got["entries"]] == ["用户偏好中文回复"]
    assert conf.query({"text": "英文"})["total"] == 0


def test_b1_replace_keeps_id_and_bumps_version(conf: filemem.Provider) -> None:
    first = conf.add({"track": "user", "scope": "user-global", "text": "likes tea"},
                     conf_ctx())["entry"]
    conf.add({"track": "user", "scope": "user-global", "text": "uses vim"}, conf_ctx())
    out = conf.replace({"track": "user", "scope": "user-global", "match": "tea",
                        "text": "likes green tea"}, conf_ctx())
    assert out["entry"]["id"] == first["id"]
    assert out["entry"]["version"] == first["version"] + 1 == 2
    assert out["entry"]["text"] == "likes green tea"
    assert out["previous"]["version"] == first["version"]
    assert out["previous"]["text"] == "likes tea"
    assert len(conf.list_entries()) == 2


def test_b2_ambiguous_replace_changes_nothing(conf: filemem.Provider) -> None:
    conf.add({"track": "user", "scope": "user-global", "text": "alpha one"}, conf_ctx())
    conf.add({"track": "user", "scope": "user-global", "text": "alpha two"}, conf_ctx())
    before = conf.list_entries()
    err = expect("AMBIGUOUS_MATCH", lambda: conf.replace(
        {"track": "user", "scope": "user-global", "match": "alpha", "text": "x"}, conf_ctx()))
    assert err.details["candidates"] == 2
    assert conf.list_entries() == before


def test_b3_replace_or_remove_without_a_hit_is_not_found(conf: filemem.Provider) -> None:
    conf.add({"track": "user", "scope": "user-global", "text": "alpha"}, conf_ctx())
    expect("ENTRY_NOT_FOUND", lambda: conf.replace(
        {"track": "user", "scope": "user-global", "match": "zeta", "text": "x"}, conf_ctx()))
    expect("ENTRY_NOT_FOUND", lambda: conf.remove(
        {"track": "user", "scope": "user-global", "match": "zeta"}, conf_ctx()))
    assert [e["text"] for e in conf.list_entries()] == ["alpha"]


def test_b4_repeating_a_remove_is_not_found(conf: filemem.Provider) -> None:
    added = conf.add({"track": "user", "scope": "user-global", "text": "temp"},
                     conf_ctx())["entry"]
    out = conf.remove({"track": "user", "scope": "user-global", "match": "temp"}, conf_ctx())
    assert out["entry"]["id"] == added["id"]
    expect("ENTRY_NOT_FOUND", lambda: conf.remove(
        {"track": "user", "scope": "user-global", "match": "temp"}, conf_ctx()))
    assert conf.list_entries() == []


def test_b5_consolidate_replaces_targets_with_one_new_entry(conf: filemem.Provider) -> None:
    a = conf.add({"track": "agent", "scope": "workspace", "text": "frag one"},
                 conf_ctx())["entry"]
    b = conf.add({"track": "agent", "scope": "workspace", "text": "frag two"},
                 conf_ctx())["entry"]
    out = conf.consolidate({"track": "agent", "scope": "workspace",
                            "matches": ["one", "two"], "text": "merged"}, conf_ctx())
    assert [r["id"] for r in out["removed"]] == [a["id"], b["id"]]
    assert out["entry"]["version"] == 1 and out["entry"]["text"] == "merged"
    assert out["entry"]["id"] not in (a["id"], b["id"])
    assert [e["text"] for e in conf.list_entries()] == ["merged"]
    expect("ENTRY_NOT_FOUND", lambda: conf.consolidate(
        {"track": "agent", "scope": "workspace", "matches": ["one", "merged"], "text": "y"},
        conf_ctx()))
    assert [e["text"] for e in conf.list_entries()] == ["merged"]


def test_b6_seed_adds_version_one_entries_with_distinct_ids(conf: filemem.Provider) -> None:
    out = conf.seed([{"track": "user", "scope": "user-global", "text": "a"},
                     {"track": "agent", "scope": "workspace", "text": "b"}], conf_ctx())
    assert out["added"] == 2
    assert [e["text"] for e in out["entries"]] == ["a", "b"]
    assert all(e["version"] == 1 for e in out["entries"])
    assert len({e["id"] for e in out["entries"]}) == 2
    assert len(conf.list_entries()) == 2


def test_b7_replace_approval_shows_old_and_new_text(
        conf: filemem.Provider, allow_calls: list[filemem.ApprovalRequest]) -> None:
    old = "the old text\nwith two lines"
    conf.add({"track": "user", "scope": "user-global", "text": old}, conf_ctx())
    allow_calls.clear()
    conf.replace({"track": "user", "scope": "user-global", "match": "old text",
                  "text": "the brand new text"}, conf_ctx())
    assert len(allow_calls) == 1
    text = allow_calls[0].payload["text"]
    assert old in text and "the brand new text" in text


def test_c1_add_over_budget_is_refused(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 100}})
    err = expect("BUDGET_EXCEEDED", lambda: p.add(
        {"track": "user", "scope": "user-global", "text": "x" * 150}, conf_ctx()))
    assert err.details["limit"] == 100
    assert err.details["needed"] >= 150
    assert p.list_entries() == []


def test_c2_seed_with_one_entry_over_budget_rejects_the_batch(
        make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 100}})
    expect("BUDGET_EXCEEDED", lambda: p.seed(
        [{"track": "agent", "scope": "workspace", "text": "fine"},
         {"track": "user", "scope": "user-global", "text": "y" * 101}], conf_ctx()))
    assert p.list_entries() == []


def test_c3_budget_row_reports_limit_and_usage(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 100}})
    p.add({"track": "user", "scope": "user-global", "text": "twelve chars"}, conf_ctx())
    row = next(r for r in p.budgets()
               if r["track"] == "user" and r["scope"] == "user-global")
    assert row == {"track": "user", "scope": "user-global", "used": 12, "limit": 100}


def test_d1_allowed_add_leaves_an_add_row(conf: filemem.Provider) -> None:
    e = conf.add({"track": "user", "scope": "user-global", "text": "audited"},
                 conf_ctx())["entry"]
    row = conf.audit_list(1)[0]
    assert row["action"] == "add"
    assert row["text"] == "audited"
    assert row["entryId"] == e["id"]
    assert isinstance(row["outcome"], str) and row["outcome"]


def test_d2_rejected_add_is_denied_and_recorded(make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="ask", gate=lambda req: "rejected")
    err = expect("WRITE_DENIED", lambda: p.add(
        {"track": "user", "scope": "user-global", "text": "nope"}, conf_ctx()))
    assert err.details == {"outcome": "rejected"}
    assert p.list_entries() == []
    row = p.audit_list(1)[0]
    assert row["action"] == "add-denied" and row["text"] == "nope"


def test_d3_query_with_session_id_records_recalled(conf: filemem.Provider) -> None:
    got = conf.query({"text": "nothing matches this"}, {"sessionId": SESSION})
    assert got["total"] == 0
    row = conf.audit_list(1)[0]
    assert row["action"] == "recalled"
    assert row["sessionId"] == SESSION
    assert row["text"] == "nothing matches this"


def test_e1_entries_fit_an_export_envelope(conf: filemem.Provider,
                                           protocol_schema: dict[str, Any]) -> None:
    conf.add({"track": "user", "scope": "user-global", "text": "a", "tags": ["k"]}, conf_ctx())
    conf.add({"track": "agent", "scope": "workspace", "text": "b"}, conf_ctx())
    doc = {"plugin": "dsh-memento", "schema": "memory-export-v1",
           "exportedAt": "2026-01-01T00:00:00.000Z", "budgets": conf.budgets(),
           "entries": conf.list_entries()}
    errs = [e.message for e in validator(protocol_schema, "exportEnvelope").iter_errors(doc)]
    assert errs == []
    assert len(doc["budgets"]) == 4
    assert [e["tags"] for e in doc["entries"]] == [["k"], []]
    assert [e["version"] for e in doc["entries"]] == [1, 1]


def test_e2_entries_stay_valid_through_replace(conf: filemem.Provider) -> None:
    e1 = conf.add({"track": "user", "scope": "user-global", "text": "v one"},
                  conf_ctx())["entry"]
    assert_valid_entry(e1)
    e2 = conf.replace({"track": "user", "scope": "user-global", "match": "v one",
                       "text": "v two"}, conf_ctx())["entry"]
    assert_valid_entry(e2)
    assert e2["version"] == e1["version"] + 1
    assert e2["updatedAt"] >= e1["updatedAt"]
    assert e2["createdAt"] == e1["createdAt"]
    for e in conf.list_entries():
        assert_valid_entry(e)
