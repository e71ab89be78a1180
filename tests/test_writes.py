"""The write pipeline: add, replace, remove, consolidate, seed.

Covers the exact messages and details of every error a write can raise, the keys a new
entry gets, visibility and isolation by agent and workspace (filemem choices 1-4, 9, 10, 12)
and re-resolution after approval: a gate that changes the store while the person decides
makes the write fail with an ``<action>-failed`` row and nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.model import workspace_key_of
from tests.conftest import BIG, Recorder, assert_clean_repo, ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
AW = {"track": "agent", "scope": "workspace"}
AG = {"track": "agent", "scope": "user-global"}
AGENT_MSG = ("memory write requires an owning agent session to route approval through; "
             "refuse rather than write unapproved")
SCOPE_MSG = ("invalid memory scope: track={} scope={} "
             "(track \u2208 user|agent, scope \u2208 user-global|workspace)")
MATCH_MSG = "replace/remove match must be a non-empty string"
MATCHES_MSG = "consolidate matches must be an array of 1..20 non-empty strings"


def expect(code: str, fn: Callable[[], Any]) -> filemem.ProtocolError:
    with pytest.raises(filemem.ProtocolError) as info:
        fn()
    assert info.value.code == code, info.value
    return info.value


def texts(p: filemem.Provider) -> list[str]:
    return [e["text"] for e in p.list_entries()]


def commits(path: Path) -> int:
    return int(git(path, "rev-list", "--count", "HEAD").strip())


# ---------------------------------------------------------------- the agent check


WRITES: dict[str, Callable[[filemem.Provider, Any], Any]] = {
    "add": lambda p, w: p.add({**UG, "text": "x"}, w),
    "replace": lambda p, w: p.replace({**UG, "match": "x", "text": "y"}, w),
    "remove": lambda p, w: p.remove({**UG, "match": "x"}, w),
    "consolidate": lambda p, w: p.consolidate({**UG, "matches": ["x"], "text": "y"}, w),
    "seed": lambda p, w: p.seed([{**UG, "text": "x"}], w),
    "import": lambda p, w: p.import_envelope({}, w),
}


@pytest.mark.parametrize("op", list(WRITES))
@pytest.mark.parametrize("write", [{}, None, "ctx", [], {"agent": None}, {"gate": None}])
def test_every_write_requires_an_agent(make_provider: MakeProvider, op: str, write: Any) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    err = expect("WRITE_REQUIRES_AGENT", lambda: WRITES[op](p, write))
    assert err.message == AGENT_MSG
    assert err.details == {}
    assert gate.calls == [] and p.list_entries() == []


def test_agent_check_runs_before_input_validation(provider: filemem.Provider) -> None:
    expect("WRITE_REQUIRES_AGENT", lambda: provider.remove({"track": "x"}, {}))
    expect("WRITE_REQUIRES_AGENT", lambda: provider.add("not even an object", None))
    expect("WRITE_REQUIRES_AGENT", lambda: provider.seed([], {}))


def test_agent_without_session_writes_to_shared_keys(provider: filemem.Provider) -> None:
    e = provider.add({**UW, "text": "no session"}, {"agent": {}})["entry"]
    assert (e["workspaceKey"], e["agentKey"], e["sessionId"]) == ("", "", None)


# ---------------------------------------------------------------- input validation


@pytest.mark.parametrize(("inp", "track", "scope"), [
    ({"track": "team", "scope": "user-global"}, '"team"', '"user-global"'),
    ({"track": "user", "scope": "global"}, '"user"', '"global"'),
    ({"track": "User", "scope": "workspace"}, '"User"', '"workspace"'),
    ({"scope": "workspace"}, "undefined", '"workspace"'),
    ({"track": "agent"}, '"agent"', "undefined"),
    ({"track": None, "scope": 3}, "null", "3"),
])
def test_bad_track_or_scope_message(provider: filemem.Provider, inp: dict[str, Any],
                                    track: str, scope: str) -> None:
    for fn in (lambda: provider.add({**inp, "text": "x"}, ctx()),
               lambda: provider.replace({**inp, "text": "x", "match": "x"}, ctx()),
               lambda: provider.remove({**inp, "match": "x"}, ctx()),
               lambda: provider.consolidate({**inp, "text": "x", "matches": ["x"]}, ctx()),
               lambda: provider.seed([{**inp, "text": "x"}], ctx())):
        err = expect("INVALID_INPUT", fn)
        assert err.message == SCOPE_MSG.format(track, scope)
        assert err.details == {}
    assert provider.list_entries() == []


@pytest.mark.parametrize("text", ["", None, 5, ["a"]])
def test_bad_text_message(provider: filemem.Provider, text: Any) -> None:
    err = expect("INVALID_INPUT", lambda: provider.add({**UG, "text": text}, ctx()))
    assert err.message == "entry text must be a non-empty string"
    assert err.details == {}
    err = expect("INVALID_INPUT", lambda: provider.add({**UG}, ctx()))
    assert err.message == "entry text must be a non-empty string"


@pytest.mark.parametrize(("tags", "message"), [
    ("pref", "entry tags must be an array of strings"),
    ({"a": 1}, "entry tags must be an array of strings"),
    (["ok", 1], "entry tags must be an array of strings"),
    (["ok", None], "entry tags must be an array of strings"),
    ([""], "entry tags must be non-empty strings"),
    ([" \t\u3000"], "entry tags must be non-empty strings"),
    (["a\tb"], 'entry tag "a\\tb" contains control characters'),
    (["a\x1f"], 'entry tag "a\\u001f" contains control characters'),
    (["x\x7f"], 'entry tag "x\x7f" contains control characters'),  # JSON leaves DEL raw
    (["abcdefghijklmnopqrstuvwxyz0123456"],
     'entry tag "abcdefghijklmnopqrst"\u2026 exceeds 32 chars'),
    (["\U0001f600" * 17], 'entry tag "' + "\U0001f600" * 10 + '"\u2026 exceeds 32 chars'),
    ([f"t{i}" for i in range(17)], "entry has 17 tags; at most 16 are allowed"),
])
def test_bad_tags_messages(provider: filemem.Provider, tags: Any, message: str) -> None:
    err = expect("INVALID_INPUT", lambda: provider.add({**UG, "text": "x", "tags": tags},
                                                        ctx()))
    assert err.message == message
    assert err.details == {}
    assert provider.list_entries() == []


def test_tags_are_trimmed_deduped_and_counted_after_dedupe(provider: filemem.Provider) -> None:
    cases = [
        (["b", " a ", "a", "b"], ["b", "a"]),
        ([" a\n"], ["a"]),
        (["same"] * 20, ["same"]),
        (["A", "a"], ["A", "a"]),
        (["x" * 32], ["x" * 32]),
        (["\U0001f600" * 16], ["\U0001f600" * 16]),
        (["c1\x85", "zw\u200b"], ["c1\x85", "zw\u200b"]),
        ([f"t{i}" for i in range(16)], [f"t{i}" for i in range(16)]),
        (None, []),
    ]
    for raw, want in cases:
        e = provider.add({**UG, "text": "t", "tags": raw}, ctx())["entry"]
        assert e["tags"] == want, raw


@pytest.mark.parametrize("match", ["", None, 0, ["x"]])
def test_bad_match_message(provider: filemem.Provider, match: Any) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    for fn in (lambda: provider.replace({**UG, "match": match, "text": "y"}, ctx()),
               lambda: provider.remove({**UG, "match": match}, ctx())):
        err = expect("INVALID_INPUT", fn)
        assert err.message == MATCH_MSG and err.details == {}
    assert texts(provider) == ["x"]


@pytest.mark.parametrize("matches", ["x", None, [], ["x"] * 21, [""], ["x", 1], ["x", None]])
def test_bad_consolidate_matches_message(provider: filemem.Provider, matches: Any) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    err = expect("INVALID_INPUT", lambda: provider.consolidate(
        {**UG, "matches": matches, "text": "y"}, ctx()))
    assert err.message == MATCHES_MSG and err.details == {}
    assert texts(provider) == ["x"]


def test_validation_order_replace_and_consolidate(provider: filemem.Provider) -> None:
    # replace: track/scope, text, tags, then match
    err = expect("INVALID_INPUT", lambda: provider.replace(
        {"track": "team", "scope": "workspace", "text": "", "match": ""}, ctx()))
    assert err.message.startswith("invalid memory scope")
    err = expect("INVALID_INPUT", lambda: provider.replace(
        {**UG, "text": "", "tags": 1, "match": ""}, ctx()))
    assert err.message == "entry text must be a non-empty string"
    err = expect("INVALID_INPUT", lambda: provider.replace(
        {**UG, "text": "t", "tags": 1, "match": ""}, ctx()))
    assert err.message == "entry tags must be an array of strings"
    # consolidate: text and tags before matches
    err = expect("INVALID_INPUT", lambda: provider.consolidate(
        {**UG, "text": "", "matches": []}, ctx()))
    assert err.message == "entry text must be a non-empty string"


@pytest.mark.parametrize("inputs", [None, [], {"track": "user"}, "x"])
def test_bad_seed_list_message(provider: filemem.Provider, inputs: Any) -> None:
    err = expect("INVALID_INPUT", lambda: provider.seed(inputs, ctx()))
    assert err.message == "seed requires a non-empty entry list" and err.details == {}


def test_seed_validates_every_entry_before_asking(make_provider: MakeProvider) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    for bad in ({**UG, "text": ""}, {"track": "team", "scope": "workspace", "text": "x"},
                {**UG, "text": "x", "tags": ["a\tb"]}, "not an entry"):
        expect("INVALID_INPUT", lambda bad=bad: p.seed(
            [{**UG, "text": "good"}, bad, {**AW, "text": "also good"}], ctx()))
    assert gate.calls == [] and p.list_entries() == []


def test_validation_failures_ask_nobody_and_commit_nothing(make_provider: MakeProvider,
                                                           store_path: Path) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    before = commits(store_path)
    expect("INVALID_INPUT", lambda: p.add({**UG, "text": ""}, ctx()))
    expect("ENTRY_NOT_FOUND", lambda: p.remove({**UG, "match": "nothing"}, ctx()))
    assert gate.calls == [] and commits(store_path) == before
    assert p.audit_list(1)[0]["action"] == "init"


# ---------------------------------------------------------------- add


def test_add_result_usage_and_one_commit(provider: filemem.Provider, store_path: Path) -> None:
    before = commits(store_path)
    out = provider.add({**UW, "text": "hello", "tags": ["t"]}, ctx("s9", "/w/a", "coder"))
    assert set(out) == {"entry", "usage"}
    assert out["usage"] == {"track": "user", "scope": "workspace", "used": 5, "limit": 2000}
    e = out["entry"]
    assert (e["workspaceKey"], e["agentKey"], e["sessionId"]) == ("/w/a", "coder", "s9")
    assert commits(store_path) == before + 1
    assert_clean_repo(store_path)
    out2 = provider.add({**UW, "text": "hello"}, ctx())
    assert out2["entry"]["id"] != e["id"]
    assert out2["usage"]["used"] == 10  # no de-duplication
    assert sorted(texts(provider)) == ["hello", "hello"]


@pytest.mark.parametrize("text", [
    "   ", "  padded\n", "line1\r\nline2\r\n", "---\nfoo: bar\n---", "key: [1, 2]",
    "偏好中文回复", "emoji \U0001f600 and \u200b zw", "x" * 5000, "\ttab\x01ctl",
    "%_ literal", "trailing newline\n\n",
])
def test_add_keeps_text_exactly(make_provider: MakeProvider, text: str) -> None:
    p = make_provider(budgets=BIG)
    e = p.add({**UG, "text": text}, ctx())["entry"]
    assert e["text"] == text
    reopened = make_provider(budgets=BIG)
    assert texts(reopened) == [text]


def test_user_global_entries_have_an_empty_workspace_key(provider: filemem.Provider) -> None:
    # filemem choice 1
    e = provider.add({**UG, "text": "global"}, ctx(cwd="/some/where"))["entry"]
    assert e["workspaceKey"] == ""
    e = provider.add({**UG, "text": "explicit", "workspaceKey": "/x"}, ctx())["entry"]
    assert e["workspaceKey"] == ""
    e = provider.add({**UW, "text": "local"}, ctx(cwd="/some/where/sub/../"))["entry"]
    assert e["workspaceKey"] == workspace_key_of("/some/where") == "/some/where"


def test_new_entry_keys_from_session_or_explicit_input(provider: filemem.Provider) -> None:
    w = ctx(cwd="/w/a", agent="  coder  ")
    e = provider.add({**AW, "text": "a"}, w)["entry"]
    assert (e["workspaceKey"], e["agentKey"]) == ("/w/a", "coder")
    e = provider.add({**AW, "text": "b", "agentKey": "", "workspaceKey": ""}, w)["entry"]
    assert (e["workspaceKey"], e["agentKey"]) == ("", "")  # explicit '' is kept
    e = provider.add({**AW, "text": "c", "agentKey": "other", "workspaceKey": "/w/b"},
                     w)["entry"]
    assert (e["workspaceKey"], e["agentKey"]) == ("/w/b", "other")
    e = provider.add({**AW, "text": "d"}, ctx(cwd="/w/a", agent=" \t "))["entry"]
    assert e["agentKey"] == ""


def test_source_default_and_empty_string(provider: filemem.Provider) -> None:
    assert provider.add({**UG, "text": "a"}, ctx())["entry"]["source"] == "filemem"
    assert provider.add({**UG, "text": "b", "source": None}, ctx())["entry"]["source"] \
        == "filemem"
    # filemem choice 12: '' is treated as missing
    assert provider.add({**UG, "text": "c", "source": ""}, ctx())["entry"]["source"] \
        == "filemem"
    assert provider.add({**UG, "text": "d", "source": "claude"}, ctx())["entry"]["source"] \
        == "claude"


# ---------------------------------------------------------------- budgets


def test_budget_exceeded_message_and_details(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 12}})
    p.add({**UG, "text": "twelve chars"}, ctx())
    err = expect("BUDGET_EXCEEDED", lambda: p.add({**UG, "text": "oops"}, ctx()))
    assert err.details == {"track": "user", "scope": "user-global", "used": 12, "limit": 12,
                           "needed": 16}
    assert err.message == ("memory budget exceeded: user/user-global at 12/12 chars, this write "
                           "needs 16 chars; consolidate or remove entries, then retry")
    assert texts(p) == ["twelve chars"]
    assert p.audit_list(1)[0]["action"] == "add"  # nobody was asked: no row
    p.remove({**UG, "match": "twelve"}, ctx())
    out = p.add({**UG, "text": "abc"}, ctx())
    assert out["usage"] == {"track": "user", "scope": "user-global", "used": 3, "limit": 12}


def test_budget_limit_is_inclusive_and_counts_utf16(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 6}})
    assert p.add({**UG, "text": "你好"}, ctx())["usage"]["used"] == 2
    assert p.add({**UG, "text": "\U0001f600"}, ctx())["usage"]["used"] == 4
    assert p.add({**UG, "text": "ab"}, ctx())["usage"]["used"] == 6  # equal to the limit
    err = expect("BUDGET_EXCEEDED", lambda: p.add({**UG, "text": "c"}, ctx()))
    assert (err.details["used"], err.details["needed"]) == (6, 7)


def test_budget_is_one_pool_per_layer(make_provider: MakeProvider) -> None:
    # filemem choice 5: every workspace and agent draws from the same track x scope pool
    p = make_provider(budgets={"agent": {"workspace": 10}})
    p.add({**AW, "text": "12345"}, ctx(cwd="/w/a", agent="coder"))
    p.add({**AW, "text": "1234"}, ctx(cwd="/w/b", agent="reviewer"))
    p.add({**UG, "text": "other layers do not count"}, ctx())
    err = expect("BUDGET_EXCEEDED", lambda: p.add({**AW, "text": "xy"}, ctx(cwd="/w/c")))
    assert (err.details["used"], err.details["limit"], err.details["needed"]) == (9, 10, 11)
    assert [r["used"] for r in p.budgets()] == [25, 0, 0, 9]


def test_replace_and_consolidate_budget_use_the_net_change(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 10}})
    p.add({**UG, "text": "aaaaa"}, ctx())
    p.add({**UG, "text": "bbbbb"}, ctx())
    err = expect("BUDGET_EXCEEDED", lambda: p.replace(
        {**UG, "match": "aaaaa", "text": "aaaaaa"}, ctx()))
    assert (err.details["used"], err.details["needed"]) == (10, 11)
    out = p.replace({**UG, "match": "aaaaa", "text": "AAAAA"}, ctx())  # net 0 at the limit
    assert out["usage"]["used"] == 10
    err = expect("BUDGET_EXCEEDED", lambda: p.consolidate(
        {**UG, "matches": ["AAAAA", "bbbbb"], "text": "c" * 11}, ctx()))
    assert (err.details["used"], err.details["needed"]) == (10, 11)
    out = p.consolidate({**UG, "matches": ["AAAAA", "bbbbb"], "text": "c" * 10}, ctx())
    assert out["usage"]["used"] == 10
    out = p.replace({**UG, "match": "c", "text": "d"}, ctx())  # shrinking is always fine
    assert out["usage"]["used"] == 1


def test_seed_checks_budget_before_asking(make_provider: MakeProvider) -> None:
    # filemem choice 4; groups are checked in order of first appearance
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate,
                      budgets={"user": {"workspace": 5}, "agent": {"workspace": 5}})
    err = expect("BUDGET_EXCEEDED", lambda: p.seed(
        [{**AW, "text": "abc"}, {**UW, "text": "123456"}, {**AW, "text": "def"}], ctx()))
    assert err.details == {"track": "agent", "scope": "workspace", "used": 0, "limit": 5,
                           "needed": 6}
    assert gate.calls == [] and p.list_entries() == []
    assert not any(r["action"].startswith("seed") for r in p.audit_list(10))


# ---------------------------------------------------------------- replace


def test_replace_result_and_kept_fields(provider: filemem.Provider) -> None:
    a = provider.add({**UW, "text": "likes tea", "tags": ["drink"], "source": "claude"},
                     ctx("s1", "/w/a", "coder"))["entry"]
    out = provider.replace({**UW, "match": "TEA", "text": "likes coffee", "source": "other"},
                           ctx("s2", "/w/a", "coder"))
    assert set(out) == {"previous", "entry", "usage"}
    prev, e = out["previous"], out["entry"]
    assert prev == a
    assert e["id"] == a["id"] and e["version"] == 2 and e["text"] == "likes coffee"
    assert e["source"] == "claude"  # input.source is not stored
    assert e["tags"] == ["drink"]
    assert e["sessionId"] == "s2"
    assert e["createdAt"] == a["createdAt"] and e["updatedAt"] >= a["updatedAt"]
    assert (e["workspaceKey"], e["agentKey"], e["track"], e["scope"]) == \
        (a["workspaceKey"], a["agentKey"], a["track"], a["scope"])
    assert out["usage"] == {"track": "user", "scope": "workspace", "used": 12, "limit": 2000}
    assert provider.list_entries() == [e]


def test_replace_with_identical_text_still_bumps_version(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "same"}, ctx())
    e = provider.replace({**UG, "match": "same", "text": "same"}, ctx())["entry"]
    assert e["version"] == 2 and e["text"] == "same"


def test_replace_tags_keep_clear_or_set(provider: filemem.Provider) -> None:
    # filemem choice 9: omitted keeps, [] clears, a list replaces
    provider.add({**UG, "text": "tagged", "tags": ["a", "b"]}, ctx())
    assert provider.replace({**UG, "match": "tagged", "text": "tagged"},
                            ctx())["entry"]["tags"] == ["a", "b"]
    assert provider.replace({**UG, "match": "tagged", "text": "tagged", "tags": None},
                            ctx())["entry"]["tags"] == ["a", "b"]
    assert provider.replace({**UG, "match": "tagged", "text": "tagged", "tags": [" c ", "c"]},
                            ctx())["entry"]["tags"] == ["c"]
    e = provider.replace({**UG, "match": "tagged", "text": "tagged", "tags": []}, ctx())["entry"]
    assert e["tags"] == [] and e["version"] == 5
    assert provider.list_entries()[0]["tags"] == []


def test_matching_folds_ascii_only(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "Prefers Chinese replies"}, ctx())
    provider.add({**UG, "text": "Café au lait"}, ctx())
    provider.add({**UG, "text": "用户偏好中文"}, ctx())
    provider.add({**UG, "text": "100% of_the time"}, ctx())
    for m in ("chinese", "CHINESE", "prefers chinese REPLIES"):
        assert provider.replace({**UG, "match": m, "text": "Prefers Chinese replies"},
                                ctx())["previous"]["text"] == "Prefers Chinese replies"
    err = expect("ENTRY_NOT_FOUND", lambda: provider.replace(
        {**UG, "match": "CAFÉ", "text": "x"}, ctx()))
    assert err.details["match"] == "CAFÉ"
    assert provider.replace({**UG, "match": "CAFé", "text": "Café au lait"},
                            ctx())["entry"]["text"] == "Café au lait"
    assert provider.replace({**UG, "match": "偏好中文", "text": "用户偏好中文"},
                            ctx())["entry"]["version"] == 2
    assert provider.replace({**UG, "match": "0% of_", "text": "100% of_the time"},
                            ctx())["entry"]["version"] == 2
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**UG, "match": "%%"}, ctx()))
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**UG, "match": "of%the"}, ctx()))


def test_matching_never_crosses_layers(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "shared word"}, ctx())
    provider.add({**UW, "text": "shared word"}, ctx())
    provider.add({**AW, "text": "shared word"}, ctx())
    out = provider.replace({**UW, "match": "shared", "text": "changed"}, ctx())
    assert out["previous"]["scope"] == "workspace" and out["previous"]["track"] == "user"
    expect("ENTRY_NOT_FOUND", lambda: provider.remove(
        {"track": "agent", "scope": "user-global", "match": "shared"}, ctx()))


# ---------------------------------------------------------------- match errors


def test_entry_not_found_message_and_details(provider: filemem.Provider) -> None:
    provider.add({**UW, "text": "alpha"}, ctx())
    err = expect("ENTRY_NOT_FOUND", lambda: provider.remove({**UW, "match": 'ze"ta'}, ctx()))
    # the reference's message, plus what was searched (the session's workspace "/work/proj")
    assert err.message == ('no entry in user/workspace contains "ze\\"ta" (searched the shared '
                           'layer of workspace "/work/proj"); nothing was changed')
    assert err.details == {"track": "user", "scope": "workspace", "match": 'ze"ta',
                           "workspaceKey": "/work/proj", "agentKey": "", "elsewhere": []}


def test_a_match_in_another_layer_the_writer_sees_is_named(provider: filemem.Provider) -> None:
    """ENTRY_NOT_FOUND says which layer, workspace and agent layers were searched, and where
    else (among the layers this session can see) the match is: by layer and count, never
    by text."""
    provider.add({**AW, "text": "CI runs on Debian 12"}, ctx(cwd="/w/api"))
    provider.add({**AG, "text": "Debian mirrors are slow"}, ctx(cwd="/w/api"))
    provider.add({**AG, "text": "Debian for coder"}, ctx(cwd="/w/api", agent="coder"))
    provider.add({**AW, "text": "Debian elsewhere"}, ctx(cwd="/w/other"))
    err = expect("ENTRY_NOT_FOUND", lambda: provider.replace(
        {**UW, "match": "debian", "text": "x"}, ctx(cwd="/w/api")))
    assert err.message == (
        'no entry in user/workspace contains "debian" (searched the shared layer of workspace '
        '"/w/api"); nothing was changed; it is in agent/user-global (the shared layer: 1 '
        'entry); agent/workspace (the shared layer of workspace "/w/api": 1 entry)')
    assert err.details["elsewhere"] == [
        {"track": "agent", "scope": "user-global", "workspaceKey": None, "agentKey": "",
         "entries": 1},
        {"track": "agent", "scope": "workspace", "workspaceKey": "/w/api", "agentKey": "",
         "entries": 1}]
    # another workspace's entry and another agent's are invisible to this session: never named
    assert "other" not in err.message and "coder" not in json.dumps(err.details)
    assert "Debian" not in err.message  # where, not what
    # a coder session sees its own layer too
    err = expect("ENTRY_NOT_FOUND", lambda: provider.remove(
        {**UG, "match": "debian"}, ctx(cwd="/w/api", agent="coder")))
    assert '(searched the shared layer and agent "coder"\'s layer); nothing' in err.message
    assert [(p["scope"], p["agentKey"], p["entries"]) for p in err.details["elsewhere"]] == [
        ("user-global", "", 1), ("user-global", "coder", 1), ("workspace", "", 1)]
    assert "agent \"coder\"'s layer: 1 entry" in err.message


def test_the_owner_is_told_of_matches_in_every_workspace_and_agent(
        make_provider: MakeProvider) -> None:
    """reveal_matches (the owner's CLI): other workspaces and agents are named too."""
    agent_side = make_provider()
    agent_side.add({**AW, "text": "Debian here"}, ctx(cwd="/w/api"))
    agent_side.add({**AW, "text": "Debian secret of coder"}, ctx(cwd="/w/tmp", agent="coder"))
    err = expect("ENTRY_NOT_FOUND", lambda: agent_side.remove(
        {**AW, "match": "Debian"}, ctx(cwd="/w/tmp")))
    assert err.details["elsewhere"] == []  # a session is never told of what it cannot see
    owner = make_provider(reveal_matches=True)
    err = expect("ENTRY_NOT_FOUND", lambda: owner.remove(
        {**AW, "match": "Debian"}, ctx(cwd="/w/tmp")))
    assert err.details["elsewhere"] == [
        {"track": "agent", "scope": "workspace", "workspaceKey": "/w/api", "agentKey": "",
         "entries": 1},
        {"track": "agent", "scope": "workspace", "workspaceKey": "/w/tmp", "agentKey": "coder",
         "entries": 1}]
    assert ('it is in agent/workspace (the shared layer of workspace "/w/api": 1 entry); '
            'agent/workspace (agent "coder"\'s layer of workspace "/w/tmp": 1 entry)'
            in err.message)
    assert "secret" not in err.message and "secret" not in json.dumps(err.details)
    # many places: three named, the rest counted
    for i in range(5):
        owner.add({**AW, "text": f"Debian {i}"}, ctx(cwd=f"/w/many{i}"))
    err = expect("ENTRY_NOT_FOUND", lambda: owner.remove(
        {**UG, "match": "Debian"}, ctx(cwd="/w/tmp")))
    assert len(err.details["elsewhere"]) == 7 and err.message.endswith("; and 4 more layers")


def test_ambiguous_match_message_and_sample(provider: filemem.Provider) -> None:
    long = "alpha " + "x" * 300
    exact = "alpha " + "y" * 194  # exactly 200 code units: not cut
    emoji = "alpha " + "\U0001f600" * 100  # 206 code units: cut at 200
    for t in ("alpha one", long, exact, emoji):
        provider.add({**UG, "text": t}, ctx())
    err = expect("AMBIGUOUS_MATCH", lambda: provider.replace(
        {**UG, "match": "ALPHA", "text": "x"}, ctx()))
    assert err.message == ('match "ALPHA" is ambiguous in user/user-global (searched the '
                           "shared layer): 4 entries contain it; use a longer, unique substring")
    assert err.details == {
        "track": "user", "scope": "user-global", "match": "ALPHA", "candidates": 4,
        "sample": ["alpha one", long[:200] + "\u2026", exact,
                   "alpha " + "\U0001f600" * 97 + "\u2026"],
        "workspaceKey": None, "agentKey": "",
    }
    assert [e["version"] for e in provider.list_entries()] == [1, 1, 1, 1]


def test_ambiguous_sample_has_every_candidate_in_creation_order(
        make_provider: MakeProvider) -> None:
    p = make_provider(budgets=BIG)
    p.seed([{**UG, "text": f"dup {i}"} for i in range(30)], ctx())
    ordered = [e["text"] for e in p.list_entries()]
    err = expect("AMBIGUOUS_MATCH", lambda: p.remove({**UG, "match": "dup"}, ctx()))
    assert err.details["candidates"] == 30
    assert err.details["sample"] == ordered


# ---------------------------------------------------------------- remove


def test_remove_result_and_usage(provider: filemem.Provider, store_path: Path) -> None:
    a = provider.add({**UW, "text": "to go"}, ctx())["entry"]
    provider.add({**UW, "text": "stays"}, ctx())
    out = provider.remove({**UW, "match": "TO GO"}, ctx())
    assert out == {"entry": a, "usage": {"track": "user", "scope": "workspace", "used": 5,
                                         "limit": 2000}}
    assert texts(provider) == ["stays"]
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- consolidate


def test_consolidate_result_and_new_entry_fields(provider: filemem.Provider,
                                                 store_path: Path) -> None:
    a = provider.add({**AW, "text": "碎片一", "tags": ["x"], "source": "claude"},
                     ctx(cwd="/w/a"))["entry"]
    b = provider.add({**AW, "text": "碎片二", "tags": ["y"]}, ctx(cwd="/w/a"))["entry"]
    before = commits(store_path)
    out = provider.consolidate({**AW, "matches": ["碎片二", "碎片一"], "text": "合并后的偏好"},
                               ctx("s7", "/w/a", "coder"))
    assert set(out) == {"removed", "entry", "usage"}
    assert out["removed"] == [b, a]  # match order
    e = out["entry"]
    assert e["tags"] == [] and e["source"] == "filemem" and e["version"] == 1
    assert (e["workspaceKey"], e["agentKey"], e["sessionId"]) == ("/w/a", "coder", "s7")
    assert out["usage"] == {"track": "agent", "scope": "workspace", "used": 6, "limit": 4000}
    assert provider.list_entries() == [e]
    assert commits(store_path) == before + 1  # one operation, one commit
    assert_clean_repo(store_path)


def test_consolidate_same_entry_twice_is_invalid_before_asking(
        make_provider: MakeProvider) -> None:
    # filemem choice 10
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    p.add({**UG, "text": "apple pie"}, ctx(gate=lambda r: "allowed-once"))
    p.add({**UG, "text": "banana"}, ctx(gate=lambda r: "allowed-once"))
    err = expect("INVALID_INPUT", lambda: p.consolidate(
        {**UG, "matches": ["banana", "apple", "pie"], "text": "fruit"}, ctx()))
    assert "same entry" in err.message and err.details == {}
    assert gate.calls == []
    assert sorted(texts(p)) == ["apple pie", "banana"]


def test_consolidate_twenty_matches(make_provider: MakeProvider) -> None:
    p = make_provider(budgets=BIG)
    p.seed([{**UG, "text": f"item-{i:02d}"} for i in range(20)], ctx())
    out = p.consolidate({**UG, "matches": [f"item-{i:02d}" for i in range(20)],
                         "text": "all twenty"}, ctx())
    assert len(out["removed"]) == 20
    assert texts(p) == ["all twenty"]


def test_consolidate_any_unresolved_match_fails_before_asking(
        make_provider: MakeProvider) -> None:
    gate = Recorder()
    p = make_provider(write_policy="off", gate=gate)
    other = make_provider()
    other.add({**UG, "text": "one"}, ctx())
    other.add({**UG, "text": "two"}, ctx())
    other.add({**UG, "text": "twofold"}, ctx())
    expect("ENTRY_NOT_FOUND", lambda: p.consolidate(
        {**UG, "matches": ["one", "missing"], "text": "x"}, ctx()))
    err = expect("AMBIGUOUS_MATCH", lambda: p.consolidate(
        {**UG, "matches": ["one", "two"], "text": "x"}, ctx()))
    assert err.details["candidates"] == 2
    assert gate.calls == [] and sorted(texts(p)) == ["one", "two", "twofold"]
    assert not any(r["action"].startswith("consolidate") for r in p.audit_list(20))


# ---------------------------------------------------------------- seed


def test_seed_result_order_and_one_commit(provider: filemem.Provider, store_path: Path) -> None:
    before = commits(store_path)
    out = provider.seed([{**UG, "text": "first", "tags": ["t"], "source": "claude"},
                         {**AW, "text": "second", "agentKey": ""},
                         {**UW, "text": "third", "workspaceKey": "/elsewhere"}],
                        ctx("s3", "/w/a", "coder"))
    assert set(out) == {"added", "entries"} and out["added"] == 3
    first, second, third = out["entries"]
    assert [first["text"], second["text"], third["text"]] == ["first", "second", "third"]
    assert first["tags"] == ["t"] and first["source"] == "claude"
    assert (first["workspaceKey"], first["agentKey"]) == ("", "coder")
    assert (second["workspaceKey"], second["agentKey"]) == ("/w/a", "")
    assert (third["workspaceKey"], third["agentKey"]) == ("/elsewhere", "coder")
    assert {e["sessionId"] for e in out["entries"]} == {"s3"}
    assert all(e["version"] == 1 and e["recallCount"] == 0 for e in out["entries"])
    assert commits(store_path) == before + 1
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- visibility and isolation


def test_isolation_by_agent_and_workspace(provider: filemem.Provider) -> None:
    coder_a = ctx(cwd="/w/a", agent="coder")
    coder_b = ctx(cwd="/w/b", agent="coder")
    reviewer_a = ctx(cwd="/w/a", agent="reviewer")
    plain_a = ctx(cwd="/w/a")
    provider.add({**AW, "text": "coder secret"}, coder_a)
    provider.add({**UG, "text": "coder global"}, coder_a)
    provider.add({**AW, "text": "shared fact"}, plain_a)
    # another agent cannot see coder's entries
    expect("ENTRY_NOT_FOUND", lambda: provider.replace(
        {**AW, "match": "coder secret", "text": "x"}, reviewer_a))
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**UG, "match": "coder"}, reviewer_a))
    # a session without a preset sees the shared layer only
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**AW, "match": "coder"}, plain_a))
    # same agent, other workspace: the workspace entry is out of reach, user-global is not
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**AW, "match": "coder secret"},
                                                      coder_b))
    assert provider.replace({**UG, "match": "coder global", "text": "coder global 2"},
                            coder_b)["entry"]["version"] == 2
    # own workspace works; the shared entry is reachable by any agent in that workspace
    assert provider.replace({**AW, "match": "secret", "text": "coder secret 2"},
                            coder_a)["entry"]["version"] == 2
    assert provider.remove({**AW, "match": "shared fact"}, reviewer_a)["entry"]["text"] \
        == "shared fact"
    assert sorted(texts(provider)) == ["coder global 2", "coder secret 2"]


def test_invisible_entries_never_make_a_match_ambiguous(provider: filemem.Provider) -> None:
    # filemem choice 3 (the reference fails after approval and leaks the other text)
    provider.add({**AW, "text": "hello from coder"}, ctx(cwd="/w/a", agent="coder"))
    provider.add({**AW, "text": "hello from reviewer (private)"},
                 ctx(cwd="/w/a", agent="reviewer"))
    provider.add({**AW, "text": "hello from another workspace"},
                 ctx(cwd="/w/b", agent="coder"))
    out = provider.replace({**AW, "match": "hello", "text": "hello again"},
                           ctx(cwd="/w/a", agent="coder"))
    assert out["previous"]["text"] == "hello from coder"
    provider.add({**AW, "text": "hello shared"}, ctx(cwd="/w/a"))
    err = expect("AMBIGUOUS_MATCH", lambda: provider.remove(
        {**AW, "match": "hello"}, ctx(cwd="/w/a", agent="coder")))
    assert err.details["candidates"] == 2
    assert sorted(err.details["sample"]) == ["hello again", "hello shared"]
    assert "private" not in err.message and "another" not in str(err.details)


def test_explicit_keys_steer_match_resolution(provider: filemem.Provider) -> None:
    provider.add({**AW, "text": "reviewer note"}, ctx(cwd="/w/b", agent="reviewer"))
    w = ctx(cwd="/w/a", agent="coder")
    # '' means "use the session's key", so the entry stays out of reach
    expect("ENTRY_NOT_FOUND", lambda: provider.remove(
        {**AW, "match": "reviewer", "agentKey": "", "workspaceKey": ""}, w))
    expect("ENTRY_NOT_FOUND", lambda: provider.remove(
        {**AW, "match": "reviewer", "agentKey": "reviewer"}, w))
    out = provider.remove({**AW, "match": "reviewer", "agentKey": "reviewer",
                           "workspaceKey": "/w/b"}, w)
    assert out["entry"]["text"] == "reviewer note"


def test_workspace_key_normalisation_joins_equivalent_cwds(provider: filemem.Provider) -> None:
    provider.add({**UW, "text": "local pref"}, ctx(cwd="/w/proj/"))
    assert provider.replace({**UW, "match": "local", "text": "local pref 2"},
                            ctx(cwd="/w/proj/sub/..//."))["entry"]["version"] == 2
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**UW, "match": "local"},
                                                      ctx(cwd="/w/Proj")))


def test_consolidating_shared_entries_from_an_agent_session_is_agent_private(
        provider: filemem.Provider) -> None:
    provider.add({**AW, "text": "shared one"}, ctx(cwd="/w/a"))
    provider.add({**AW, "text": "shared two"}, ctx(cwd="/w/a"))
    out = provider.consolidate({**AW, "matches": ["one", "two"], "text": "merged"},
                               ctx(cwd="/w/a", agent="coder"))
    assert out["entry"]["agentKey"] == "coder"
    expect("ENTRY_NOT_FOUND", lambda: provider.remove({**AW, "match": "merged"},
                                                      ctx(cwd="/w/a")))


# ---------------------------------------------------------------- re-resolution after approval


@pytest.fixture
def racing(make_provider: MakeProvider) -> tuple[filemem.Provider, filemem.Provider]:
    """(writer under ``ask``, another provider instance on the same store under ``auto``)."""
    return make_provider(write_policy="ask"), make_provider()


def mutating_gate(action: Callable[[], Any]) -> Callable[[filemem.ApprovalRequest], str]:
    def gate(req: filemem.ApprovalRequest) -> str:
        action()
        return "allowed-once"
    return gate


def assert_failed_row(p: filemem.Provider, action: str, code: str, text: str,
                      session: str = "s1") -> None:
    row = p.audit_list(1)[0]
    assert row["action"] == f"{action}-failed"
    assert row["entryId"] is None
    assert row["text"] == text
    assert row["sessionId"] == session
    assert row["outcome"].startswith("allowed-once (via write gate")
    assert code in row["outcome"]


CHANGED = "changed while approval was pending"


def test_replace_fails_when_the_target_was_rewritten_meanwhile(
        racing: tuple[filemem.Provider, filemem.Provider], store_path: Path) -> None:
    p, other = racing
    other.add({**UG, "text": "ab"}, ctx())
    gate = mutating_gate(lambda: other.replace({**UG, "match": "ab", "text": "xabx"}, ctx()))
    err = expect("ENTRY_NOT_FOUND", lambda: p.replace(
        {**UG, "match": "ab", "text": "new"}, ctx(gate=gate)))
    assert CHANGED in err.message
    assert err.details == {"track": "user", "scope": "user-global", "match": "ab",
                           "workspaceKey": None, "agentKey": ""}
    assert [(e["text"], e["version"]) for e in p.list_entries()] == [("xabx", 2)]
    assert_failed_row(p, "replace", "ENTRY_NOT_FOUND", "from:\nab\n\nto:\nnew")
    assert_clean_repo(store_path)


def test_replace_fails_when_the_target_was_removed_meanwhile(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    other.add({**UG, "text": "doomed"}, ctx())
    gate = mutating_gate(lambda: other.remove({**UG, "match": "doomed"}, ctx()))
    err = expect("ENTRY_NOT_FOUND", lambda: p.replace(
        {**UG, "match": "doomed", "text": "saved"}, ctx(gate=gate)))
    assert CHANGED in err.message
    assert p.list_entries() == []
    assert_failed_row(p, "replace", "ENTRY_NOT_FOUND", "from:\ndoomed\n\nto:\nsaved")


def test_replace_fails_when_a_same_text_entry_took_the_target_place(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    other.add({**UG, "text": "twin"}, ctx())

    def swap() -> None:
        other.remove({**UG, "match": "twin"}, ctx())
        other.add({**UG, "text": "twin"}, ctx())  # same text, different entry

    err = expect("ENTRY_NOT_FOUND", lambda: p.replace(
        {**UG, "match": "twin", "text": "x"}, ctx(gate=mutating_gate(swap))))
    assert CHANGED in err.message
    assert texts(p) == ["twin"] and p.list_entries()[0]["version"] == 1


def test_remove_fails_when_the_target_changed_meanwhile(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    other.add({**AW, "text": "keep me"}, ctx())
    gate = mutating_gate(lambda: other.replace({**AW, "match": "keep", "text": "keep me!"},
                                               ctx()))
    err = expect("ENTRY_NOT_FOUND", lambda: p.remove({**AW, "match": "keep"}, ctx(gate=gate)))
    assert CHANGED in err.message
    assert texts(p) == ["keep me!"]
    assert_failed_row(p, "remove", "ENTRY_NOT_FOUND", "keep me")


def test_consolidate_fails_when_a_target_was_removed_meanwhile(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    other.add({**AW, "text": "part one"}, ctx())
    other.add({**AW, "text": "part two"}, ctx())
    gate = mutating_gate(lambda: other.remove({**AW, "match": "part two"}, ctx()))
    err = expect("ENTRY_NOT_FOUND", lambda: p.consolidate(
        {**AW, "matches": ["one", "two"], "text": "whole"}, ctx(gate=gate)))
    assert CHANGED in err.message and err.details["match"] == "two"
    assert texts(p) == ["part one"]
    row = p.audit_list(1)[0]
    assert row["action"] == "consolidate-failed"
    assert row["text"] == "remove: one\npart one\nremove: two\npart two\nnew text: whole"


def test_a_new_visible_match_during_approval_stops_the_write(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    other.add({**UG, "text": "target"}, ctx())
    gate = mutating_gate(lambda: other.add({**UG, "text": "another target"}, ctx()))
    with pytest.raises(filemem.ProtocolError) as info:
        p.remove({**UG, "match": "target"}, ctx(gate=gate))
    assert info.value.code in ("AMBIGUOUS_MATCH", "ENTRY_NOT_FOUND")
    assert sorted(texts(p)) == ["another target", "target"]
    assert p.audit_list(1)[0]["action"] == "remove-failed"


def test_an_invisible_entry_added_during_approval_does_not_matter(
        racing: tuple[filemem.Provider, filemem.Provider]) -> None:
    p, other = racing
    w = ctx(cwd="/w/a", agent="coder")
    other.add({**AW, "text": "hello world"}, w)
    gate = mutating_gate(lambda: other.add({**AW, "text": "hello reviewer"},
                                           ctx(cwd="/w/a", agent="reviewer")))
    out = p.replace({**AW, "match": "hello", "text": "hello coder"}, {**w, "gate": gate})
    assert out["previous"]["text"] == "hello world"
    assert sorted(texts(p)) == ["hello coder", "hello reviewer"]


def test_add_fails_when_the_budget_filled_meanwhile(make_provider: MakeProvider,
                                                    store_path: Path) -> None:
    budgets = {"user": {"userGlobal": 10}}
    p = make_provider(write_policy="ask", budgets=budgets)
    other = make_provider(budgets=budgets)
    gate = mutating_gate(lambda: other.add({**UG, "text": "12345678"}, ctx()))
    err = expect("BUDGET_EXCEEDED", lambda: p.add({**UG, "text": "abcde"}, ctx(gate=gate)))
    assert err.details == {"track": "user", "scope": "user-global", "used": 8, "limit": 10,
                           "needed": 13}
    assert texts(p) == ["12345678"]
    assert_failed_row(p, "add", "BUDGET_EXCEEDED", "abcde")
    assert_clean_repo(store_path)


def test_replace_fails_when_the_budget_filled_meanwhile(make_provider: MakeProvider) -> None:
    budgets = {"user": {"userGlobal": 12}}
    p = make_provider(write_policy="ask", budgets=budgets)
    other = make_provider(budgets=budgets)
    other.add({**UG, "text": "ab"}, ctx())
    gate = mutating_gate(lambda: other.add({**UG, "text": "x" * 10}, ctx()))
    err = expect("BUDGET_EXCEEDED", lambda: p.replace(
        {**UG, "match": "ab", "text": "abcdefgh"}, ctx(gate=gate)))
    assert (err.details["used"], err.details["needed"]) == (12, 18)
    assert sorted(texts(p)) == ["ab", "x" * 10]
    assert_failed_row(p, "replace", "BUDGET_EXCEEDED", "from:\nab\n\nto:\nabcdefgh")


def test_seed_fails_when_the_budget_filled_meanwhile(make_provider: MakeProvider) -> None:
    budgets = {"agent": {"workspace": 10}}
    p = make_provider(write_policy="ask", budgets=budgets)
    other = make_provider(budgets=budgets)
    gate = mutating_gate(lambda: other.add({**AW, "text": "1234567"}, ctx()))
    err = expect("BUDGET_EXCEEDED", lambda: p.seed(
        [{**UG, "text": "ok"}, {**AW, "text": "abcd"}], ctx(gate=gate)))
    assert (err.details["track"], err.details["scope"], err.details["needed"]) == \
        ("agent", "workspace", 11)
    assert texts(p) == ["1234567"]  # no partial write of the user/user-global entry
    row = p.audit_list(1)[0]
    assert row["action"] == "seed-failed"
    assert (row["track"], row["scope"]) == ("batch", "batch")
    assert row["text"] == "user/user-global: ok\nagent/workspace: abcd"


def test_consolidate_fails_when_the_budget_filled_meanwhile(make_provider: MakeProvider) -> None:
    budgets = {"user": {"workspace": 10}}
    p = make_provider(write_policy="ask", budgets=budgets)
    other = make_provider(budgets=budgets)
    other.add({**UW, "text": "a1"}, ctx())
    other.add({**UW, "text": "b2"}, ctx())
    gate = mutating_gate(lambda: other.add({**UW, "text": "123456"}, ctx(cwd="/elsewhere")))
    err = expect("BUDGET_EXCEEDED", lambda: p.consolidate(
        {**UW, "matches": ["a1", "b2"], "text": "abcdef"}, ctx(gate=gate)))
    assert (err.details["used"], err.details["needed"]) == (10, 12)
    assert sorted(texts(p)) == ["123456", "a1", "b2"]
    assert p.audit_list(1)[0]["action"] == "consolidate-failed"


def test_the_same_provider_changing_the_target_inside_its_own_gate(
        make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="ask")

    def allow(req: filemem.ApprovalRequest) -> str:
        return "allowed-once"

    p.add({**UG, "text": "target"}, ctx(gate=allow))
    gate = mutating_gate(lambda: p.replace({**UG, "match": "target", "text": "target 2"},
                                           ctx(gate=allow)))
    err = expect("ENTRY_NOT_FOUND", lambda: p.remove({**UG, "match": "target"},
                                                     ctx(gate=gate)))
    assert CHANGED in err.message
    assert [(e["text"], e["version"]) for e in p.list_entries()] == [("target 2", 2)]
    assert [r["action"] for r in p.audit_list(3)] == ["remove-failed", "replace", "add"]


# ---------------------------------------------------------------- other refusals


def test_write_denied_message_and_details(make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="off")
    err = expect("WRITE_DENIED", lambda: p.add({**UG, "text": "x"}, ctx()))
    assert err.message == ("memory write not approved (approval outcome: rejected); "
                           "nothing was written")
    assert err.details == {"outcome": "rejected"}
    assert p.list_entries() == []


@pytest.mark.parametrize("inp", [
    {**UG, "text": "lone \ud800 surrogate"},
    {**UG, "text": "ok", "tags": ["bad \udfff"]},
])
def test_text_that_cannot_be_stored_is_invalid_input(provider: filemem.Provider,
                                                     inp: dict[str, Any]) -> None:
    expect("INVALID_INPUT", lambda: provider.add(inp, ctx()))
    assert provider.list_entries() == []
