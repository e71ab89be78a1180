"""Approval: write policies and their overrides, the request a person sees, outcome labels that
name what decided (filemem choice 6), and denials that leave an ``<action>-denied`` row and
write nothing (filemem choice 11)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import Recorder, assert_clean_repo, ctx

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
AG = {"track": "agent", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}

# the reason string's grammar, read back: a host that only gets the string can recover the
# whole payload from it
_REASON_RE = re.compile(
    r"^\[dsh-memento\] ([a-z]+)(?: \((\d+) entries\))? ([a-z]+)/([a-z-]+)"
    r"(?: \[source:([^\]]+)\])?\n([\s\S]*)$"
)


def parse_reason(text: str) -> dict[str, Any] | None:
    m = _REASON_RE.match(text)
    if not m:
        return None
    action, count, track, scope, source, body = m.groups()
    out: dict[str, Any] = {"action": action, "track": track, "scope": scope, "text": body}
    if count is not None:
        out["count"] = int(count)
    if source is not None:
        out["source"] = source
    return out



def expect(code: str, fn: Callable[[], Any]) -> filemem.ProtocolError:
    with pytest.raises(filemem.ProtocolError) as info:
        fn()
    assert info.value.code == code, info.value
    return info.value


def texts(p: filemem.Provider) -> list[str]:
    return [e["text"] for e in p.list_entries()]


def last_row(p: filemem.Provider) -> dict[str, Any]:
    return p.audit_list(1)[0]


@pytest.fixture
def filled(make_provider: MakeProvider) -> filemem.Provider:
    """An auto-policy provider that put a few entries in the store."""
    p = make_provider()
    p.add({**UG, "text": "likes tea"}, ctx())
    p.add({**UG, "text": "from claude", "source": "claude"}, ctx())
    p.add({**AW, "text": "part one"}, ctx())
    p.add({**AW, "text": "part two"}, ctx())
    return p


# ---------------------------------------------------------------- global policies


def test_auto_allows_without_asking(make_provider: MakeProvider) -> None:
    gate = Recorder("rejected")
    p = make_provider(write_policy="auto", gate=gate)
    p.add({**UG, "text": "auto"}, ctx(gate=gate))
    assert gate.calls == []
    assert texts(p) == ["auto"]
    assert last_row(p)["outcome"] == "allowed-once (via approval, writePolicy auto)"


def test_off_rejects_without_asking(make_provider: MakeProvider, store_path: Path) -> None:
    gate = Recorder()
    p = make_provider(write_policy="off", gate=gate)
    err = expect("WRITE_DENIED", lambda: p.add({**UG, "text": "no way"}, ctx(gate=gate)))
    assert err.details == {"outcome": "rejected"}
    assert err.message == ("memory write not approved (approval outcome: rejected); "
                           "nothing was written")
    # the protocol's rejection; the class tells the surfaces' hints that no person was asked
    assert isinstance(err, filemem.errors.PolicyRefused) and err.policy_key is None
    assert gate.calls == [] and p.list_entries() == []
    row = last_row(p)
    assert (row["action"], row["text"], row["outcome"]) == \
        ("add-denied", "no way", "rejected (via approval, writePolicy off)")
    assert_clean_repo(store_path)


def test_ask_without_any_gate_is_unavailable(make_provider: MakeProvider) -> None:
    """With staging turned off (the reference's behaviour); staging: tests/test_pending.py."""
    p = make_provider(write_policy="ask", stage_pending=False)
    err = expect("WRITE_DENIED", lambda: p.add({**UG, "text": "nobody home"}, ctx()))
    assert err.details == {"outcome": "unavailable"}
    assert err.message.startswith("memory write not approved (approval outcome: unavailable")
    assert err.message.endswith("; nothing was written")
    row = last_row(p)
    assert row["action"] == "add-denied"
    assert row["outcome"].startswith("unavailable (via approval, writePolicy ask")
    assert p.list_entries() == []


def test_ask_uses_the_provider_gate(make_provider: MakeProvider) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    p.add({**UG, "text": "asked"}, ctx())
    assert len(gate.calls) == 1
    assert last_row(p)["outcome"].startswith("allowed-once (via approval, writePolicy ask")


def test_label_names_a_named_gate(make_provider: MakeProvider) -> None:
    class Terminal(Recorder):
        name = "terminal prompt"

    p = make_provider(write_policy="ask", gate=Terminal())
    p.add({**UG, "text": "asked"}, ctx())
    assert "terminal prompt" in last_row(p)["outcome"]


def test_per_call_gate_wins_over_the_provider_gate(make_provider: MakeProvider) -> None:
    provider_gate = Recorder("rejected")
    call_gate = Recorder()
    p = make_provider(write_policy="ask", gate=provider_gate)
    p.add({**UG, "text": "via call"}, ctx(gate=call_gate))
    assert provider_gate.calls == [] and len(call_gate.calls) == 1
    assert last_row(p)["outcome"].startswith("allowed-once (via write gate")
    call_gate.outcome = "rejected"
    expect("WRITE_DENIED", lambda: p.add({**UG, "text": "refused"}, ctx(gate=call_gate)))
    assert last_row(p)["outcome"].startswith("rejected (via write gate")
    assert texts(p) == ["via call"]


def test_a_write_gate_cannot_override_off(make_provider: MakeProvider) -> None:
    call_gate = Recorder()
    p = make_provider(write_policy="off")
    expect("WRITE_DENIED", lambda: p.add({**UG, "text": "x"}, ctx(gate=call_gate)))
    assert call_gate.calls == [] and p.list_entries() == []


def test_non_callable_write_gate_falls_back_to_provider_gate(make_provider: MakeProvider) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    p.add({**UG, "text": "x"}, {**ctx(), "gate": "yes please"})
    assert len(gate.calls) == 1


# ---------------------------------------------------------------- writePolicies


def test_write_policies_precedence(make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="ask", stage_pending=False, write_policies={
        "user/workspace": "off", "agent/user-global": "auto", "source:claude": "auto"})
    # unmatched: the global ask, nobody to ask
    err = expect("WRITE_DENIED", lambda: p.add({**UG, "text": "a"}, ctx()))
    assert err.details == {"outcome": "unavailable"}
    # track/scope key
    err = expect("WRITE_DENIED", lambda: p.add({**UW, "text": "b"}, ctx()))
    assert err.details == {"outcome": "rejected"}
    assert last_row(p)["outcome"] == "rejected (via approval, writePolicy off for user/workspace)"
    p.add({**AG, "text": "c"}, ctx())
    assert last_row(p)["outcome"] == \
        "allowed-once (via approval, writePolicy auto for agent/user-global)"
    # source beats track/scope
    p.add({**UW, "text": "d", "source": "claude"}, ctx())
    assert last_row(p)["outcome"] == \
        "allowed-once (via approval, writePolicy auto for source:claude)"
    # a source key matches that exact source only
    err = expect("WRITE_DENIED", lambda: p.add({**UW, "text": "e", "source": "claude-2"}, ctx()))
    assert err.details == {"outcome": "rejected"}
    assert sorted(texts(p)) == ["c", "d"]


def test_policy_key_and_policy_reach_the_gate(make_provider: MakeProvider) -> None:
    gate = Recorder()
    p = make_provider(write_policy="auto", gate=gate,
                      write_policies={"user/user-global": "ask", "source:mem0": "ask"})
    p.add({**AW, "text": "auto one"}, ctx())
    assert gate.calls == []
    p.add({**UG, "text": "asked one"}, ctx())
    p.add({**AW, "text": "asked two", "source": "mem0"}, ctx())
    assert [(c.policy, c.policy_key) for c in gate.calls] == [("ask", "user/user-global"),
                                                             ("ask", "source:mem0")]
    rows = p.audit_list(2)
    assert rows[0]["outcome"].startswith("allowed-once (via approval, writePolicy ask for "
                                         "source:mem0")
    assert rows[1]["outcome"].startswith("allowed-once (via approval, writePolicy ask for "
                                         "user/user-global")


def test_seed_uses_the_global_policy(make_provider: MakeProvider) -> None:
    overrides = {"user/user-global": "off", "agent/workspace": "off", "source:claude": "off"}
    p = make_provider(write_policy="auto", write_policies=overrides)
    batch = [{**UG, "text": "s1", "source": "claude"}, {**AW, "text": "s2"}]
    p.seed(batch, ctx())
    assert sorted(texts(p)) == ["s1", "s2"]
    seed_row = next(r for r in p.audit_list(5) if r["action"] == "seed")
    assert seed_row["outcome"] == "allowed-once (via approval, writePolicy auto)"
    q = make_provider(write_policy="off", write_policies={
        "user/user-global": "auto", "agent/workspace": "auto", "source:claude": "auto",
        "source:filemem": "auto"})
    err = expect("WRITE_DENIED", lambda: q.seed(batch, ctx()))
    assert err.details == {"outcome": "rejected"}
    assert last_row(q)["outcome"] == "rejected (via approval, writePolicy off)"
    assert sorted(texts(q)) == ["s1", "s2"]


def test_remove_uses_the_target_source(filled: filemem.Provider,
                                       make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="off", write_policies={"source:claude": "auto"})
    out = p.remove({**UG, "match": "from claude"}, ctx())
    assert out["entry"]["source"] == "claude"
    assert last_row(p)["outcome"] == \
        "allowed-once (via approval, writePolicy auto for source:claude)"
    err = expect("WRITE_DENIED", lambda: p.remove({**UG, "match": "tea"}, ctx()))
    assert err.details == {"outcome": "rejected"}
    assert last_row(p)["source"] == "filemem"
    assert sorted(texts(p)) == ["likes tea", "part one", "part two"]


def test_replace_and_consolidate_use_the_input_source(filled: filemem.Provider,
                                                      make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="off", write_policies={"source:claude": "auto"})
    expect("WRITE_DENIED", lambda: p.replace({**UG, "match": "from claude",
                                              "text": "changed"}, ctx()))
    p.replace({**UG, "match": "tea", "text": "likes green tea", "source": "claude"}, ctx())
    out = p.consolidate({**AW, "matches": ["one", "two"], "text": "whole", "source": "claude"},
                        ctx())
    assert out["entry"]["source"] == "claude"
    expect("WRITE_DENIED", lambda: p.consolidate(
        {**AW, "matches": ["whole"], "text": "again"}, ctx()))
    assert sorted(texts(p)) == ["from claude", "likes green tea", "whole"]


def test_import_uses_the_global_policy(make_provider: MakeProvider) -> None:
    src = make_provider()
    src.add({**UG, "text": "exported", "source": "claude"}, ctx())
    doc = src.export()
    p = make_provider(write_policy="off", write_policies={"source:claude": "auto",
                                                          "user/user-global": "auto"})
    err = expect("WRITE_DENIED", lambda: p.import_envelope(doc, ctx()))
    assert err.details == {"outcome": "rejected"}
    assert last_row(p)["action"] == "seed-denied"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"write_policy": "maybe"}, 'invalid writePolicy "maybe" (one of ask|auto|off)'),
    ({"write_policy": "Auto"}, 'invalid writePolicy "Auto" (one of ask|auto|off)'),
    ({"write_policies": {"team/workspace": "auto"}},
     'invalid writePolicies key "team/workspace" (expected "track/scope" or "source:<name>")'),
    ({"write_policies": {"source:Claude": "auto"}},
     'invalid writePolicies key "source:Claude" (expected "track/scope" or "source:<name>")'),
    ({"write_policies": {"user/user-global": "never"}},
     'invalid writePolicies value for "user/user-global": "never" (one of ask|auto|off)'),
    ({"write_policies": {"source:claude": None}},
     'invalid writePolicies value for "source:claude": null (one of ask|auto|off)'),
])
def test_bad_policy_configuration_fails_at_open(make_provider: MakeProvider,
                                                kwargs: dict[str, Any], message: str) -> None:
    make_provider().close()  # the store exists; only the overrides are bad
    err = expect("INVALID_INPUT", lambda: make_provider(**kwargs))
    assert err.message == message


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10", None, True])
def test_bad_budget_configuration_fails_at_open(make_provider: MakeProvider, limit: Any) -> None:
    make_provider().close()
    err = expect("INVALID_INPUT", lambda: make_provider(budgets={"user": {"userGlobal": limit}}))
    assert "budgets.user.userGlobal must be a positive integer" in err.message


# ---------------------------------------------------------------- what the person is asked


@pytest.fixture
def asking(make_provider: MakeProvider) -> tuple[filemem.Provider, Recorder]:
    gate = Recorder()
    return make_provider(write_policy="ask", gate=gate), gate


def test_add_request(asking: tuple[filemem.Provider, Recorder]) -> None:
    p, gate = asking
    w = ctx("s-add", "/w/a", "coder")
    p.add({**UW, "text": "第二行\n第三行"}, w)
    (req,) = gate.calls
    assert req.payload == {"action": "add", "track": "user", "scope": "workspace",
                           "text": "第二行\n第三行", "source": "filemem"}
    assert req.reason == "[dsh-memento] add user/workspace [source:filemem]\n第二行\n第三行"
    assert parse_reason(req.reason) == req.payload
    assert req.write["agent"] == w["agent"]
    assert (req.policy, req.policy_key) == ("ask", None)
    assert (req.action, req.text) == ("add", "第二行\n第三行")


def test_the_gate_sees_the_store_before_the_write(asking: tuple[filemem.Provider, Recorder],
                                                  make_provider: MakeProvider) -> None:
    p, _ = asking
    seen: list[list[str]] = []
    viewer = make_provider()

    def gate(req: filemem.ApprovalRequest) -> str:
        seen.append(texts(viewer))
        return "allowed-once"

    p.add({**UG, "text": "pending"}, ctx(gate=gate))
    assert seen == [[]]
    assert texts(viewer) == ["pending"]


def test_replace_request_shows_from_and_to(filled: filemem.Provider,
                                           asking: tuple[filemem.Provider, Recorder]) -> None:
    p, gate = asking
    p.replace({**UG, "match": "tea", "text": "likes\ncoffee", "source": "memory-tool"}, ctx())
    (req,) = gate.calls
    assert req.payload == {"action": "replace", "track": "user", "scope": "user-global",
                           "text": "from:\nlikes tea\n\nto:\nlikes\ncoffee",
                           "source": "memory-tool"}
    assert req.reason == ("[dsh-memento] replace user/user-global [source:memory-tool]\n"
                          "from:\nlikes tea\n\nto:\nlikes\ncoffee")


def test_replace_request_text_is_never_cut(make_provider: MakeProvider,
                                           asking: tuple[filemem.Provider, Recorder]) -> None:
    old, new = "o" * 1500, "n" * 1800
    make_provider().add({**AG, "text": old}, ctx())
    p, gate = asking
    p.replace({**AG, "match": "ooo", "text": new}, ctx())
    assert gate.calls[0].payload["text"] == f"from:\n{old}\n\nto:\n{new}"


def test_remove_request_shows_the_full_text_and_target_source(
        filled: filemem.Provider, asking: tuple[filemem.Provider, Recorder]) -> None:
    p, gate = asking
    p.remove({**UG, "match": "claude"}, ctx())
    (req,) = gate.calls
    assert req.payload == {"action": "remove", "track": "user", "scope": "user-global",
                           "text": "from claude", "source": "claude"}
    assert req.reason == "[dsh-memento] remove user/user-global [source:claude]\nfrom claude"


def test_consolidate_request_shows_the_plan(make_provider: MakeProvider,
                                            asking: tuple[filemem.Provider, Recorder]) -> None:
    setup = make_provider()
    setup.add({**AW, "text": "碎片一"}, ctx())
    setup.add({**AW, "text": "碎片二"}, ctx())
    p, gate = asking
    p.consolidate({**AW, "matches": ["碎片一", "碎片二"], "text": "合并后的偏好"}, ctx())
    (req,) = gate.calls
    assert req.payload == {"action": "consolidate", "track": "agent", "scope": "workspace",
                           "text": "remove: 碎片一\n碎片一\nremove: 碎片二\n碎片二\n"
                                   "new text: 合并后的偏好",
                           "source": "filemem"}


def test_consolidate_plan_cuts_long_targets_at_300(make_provider: MakeProvider,
                                                   asking: tuple[filemem.Provider, Recorder]
                                                   ) -> None:
    setup = make_provider()
    exact = "E" + "e" * 299  # exactly 300: not cut
    long = "L" + "l" * 400
    astral = "A" + "\U0001f600" * 200  # 401 code units: cut at 299 + ellipsis
    for t in (exact, long, astral):
        setup.add({**AG, "text": t}, ctx())
    p, gate = asking
    new_text = "N" * 700
    p.consolidate({**AG, "matches": ["Ee", "Ll", "A\U0001f600"], "text": new_text,
                   "source": "claude"}, ctx())
    (req,) = gate.calls
    assert req.payload["text"] == "\n".join([
        "remove: Ee", exact,
        "remove: Ll", long[:300] + "\u2026",
        "remove: A\U0001f600", "A" + "\U0001f600" * 149 + "\u2026",
        f"new text: {new_text}",
    ])
    assert req.payload["source"] == "claude"


def test_seed_request_is_one_batch_summary(asking: tuple[filemem.Provider, Recorder]) -> None:
    p, gate = asking
    p.seed([{**UG, "text": "a", "source": "claude"}, {**AW, "text": "b\nc"}], ctx())
    (req,) = gate.calls
    assert req.payload == {"action": "seed", "track": "batch", "scope": "batch",
                           "text": "user/user-global: a\nagent/workspace: b\nc", "count": 2}
    assert "source" not in req.payload
    assert req.reason == ("[dsh-memento] seed (2 entries) batch/batch\n"
                          "user/user-global: a\nagent/workspace: b\nc")
    assert parse_reason(req.reason) == req.payload


def test_one_request_per_operation(asking: tuple[filemem.Provider, Recorder]) -> None:
    p, gate = asking
    p.seed([{**AW, "text": f"x{i:02d}"} for i in range(50)], ctx())
    assert len(gate.calls) == 1
    p.consolidate({**AW, "matches": ["x01", "x02", "x03"], "text": "y"}, ctx())
    assert len(gate.calls) == 2
    assert gate.calls[1].payload["action"] == "consolidate"


# ---------------------------------------------------------------- denials


def do_write(p: filemem.Provider, action: str, w: dict[str, Any]) -> Any:
    if action == "add":
        return p.add({**UG, "text": "new one", "source": "claude"}, w)
    if action == "replace":
        return p.replace({**UG, "match": "tea", "text": "likes coffee"}, w)
    if action == "remove":
        return p.remove({**UG, "match": "claude"}, w)
    if action == "consolidate":
        return p.consolidate({**AW, "matches": ["one", "two"], "text": "whole"}, w)
    return p.seed([{**UG, "text": "s1"}, {**AW, "text": "s2"}], w)


DENIED_ROWS = {
    "add": ("user", "user-global", "new one", "claude"),
    "replace": ("user", "user-global", "from:\nlikes tea\n\nto:\nlikes coffee", "filemem"),
    "remove": ("user", "user-global", "from claude", "claude"),
    "consolidate": ("agent", "workspace",
                    "remove: one\npart one\nremove: two\npart two\nnew text: whole",
                    "filemem"),
    "seed": ("batch", "batch", "user/user-global: s1\nagent/workspace: s2", "filemem"),
}


@pytest.mark.parametrize("action", list(DENIED_ROWS))
@pytest.mark.parametrize("answer", ["rejected", "cancelled", "allowed-always", "unavailable",
                                    "ALLOWED-ONCE"])
def test_denied_write_changes_nothing_and_leaves_a_row(
        filled: filemem.Provider, make_provider: MakeProvider, store_path: Path,
        action: str, answer: str) -> None:
    gate = Recorder(answer)
    p = make_provider(write_policy="ask", stage_pending=False, gate=gate)
    before = p.list_entries()
    err = expect("WRITE_DENIED", lambda: do_write(p, action, ctx("s-deny")))
    assert err.details == {"outcome": answer}
    assert err.message == (f"memory write not approved (approval outcome: {answer}); "
                           "nothing was written")
    assert len(gate.calls) == 1
    assert p.list_entries() == before
    row = last_row(p)
    track, scope, text, source = DENIED_ROWS[action]
    assert {k: row[k] for k in ("action", "track", "scope", "entryId", "text", "source",
                                "sessionId")} == {
        "action": f"{action}-denied", "track": track, "scope": scope, "entryId": None,
        "text": text, "source": source, "sessionId": "s-deny"}
    assert row["outcome"].startswith(f"{answer} (via approval, writePolicy ask")
    assert_clean_repo(store_path)


@pytest.mark.parametrize("answer", [None, "", 1])
def test_a_non_answer_is_unavailable(make_provider: MakeProvider, answer: Any) -> None:
    p = make_provider(write_policy="ask", stage_pending=False, gate=Recorder(answer))
    err = expect("WRITE_DENIED", lambda: p.add({**UG, "text": "x"}, ctx()))
    assert err.details == {"outcome": "unavailable"}
    assert p.list_entries() == []
    assert last_row(p)["action"] == "add-denied"


@pytest.mark.parametrize("action", list(DENIED_ROWS))
def test_a_raising_gate_fails_closed(filled: filemem.Provider, make_provider: MakeProvider,
                                     action: str) -> None:
    def broken(req: filemem.ApprovalRequest) -> str:
        raise RuntimeError("prompt crashed")

    p = make_provider(write_policy="ask", stage_pending=False)
    before = p.list_entries()
    err = expect("WRITE_DENIED", lambda: do_write(p, action, ctx(gate=broken)))
    assert err.details == {"outcome": "unavailable"}
    assert "approval ask failed: prompt crashed" in err.message
    assert p.list_entries() == before
    row = last_row(p)
    assert row["action"] == f"{action}-denied"
    assert row["text"] == DENIED_ROWS[action][2]
    assert row["outcome"].startswith("unavailable (via write gate")
