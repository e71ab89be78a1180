"""Property tests: the entry file round-trips any entry, and a failed write changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import filemem
from filemem import errors
from filemem.files.codec import decode, encode, encodings
from filemem.jsstr import js_trim, utf16_len
from filemem.model import Entry
from tests.conftest import assert_clean_repo, ctx, git

UUID = "0f7c1b1e-4a5b-4c3d-9e8f-001122334455"

# ---------------------------------------------------------------- strategies for entries

# any code point but a lone surrogate (those cannot be stored as UTF-8)
any_text = st.text(st.characters(blacklist_categories=("Cs",)))
# an entry's text holds no NUL either: it goes into its commits' messages, which git refuses
stored_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=["\x00"])
tag_text = st.text(
    st.characters(blacklist_categories=("Cs",),
                  blacklist_characters=[chr(c) for c in range(0x20)] + ["\x7f"]),
    min_size=1, max_size=20,
).map(js_trim).filter(lambda t: 0 < utf16_len(t) <= 32)
uuids = st.uuids(version=4).map(str)
ms = st.integers(min_value=0, max_value=253402300799999)  # up to 9999-12-31


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    scope = draw(st.sampled_from(["user-global", "workspace"]))
    created = draw(ms)
    return Entry(
        id=draw(uuids),
        track=draw(st.sampled_from(["user", "agent"])),
        scope=scope,
        workspace_key="" if scope == "user-global" else draw(any_text),
        agent_key=draw(any_text),
        text=draw(st.text(stored_chars, min_size=1)),
        source=draw(any_text.filter(bool)),
        tags=tuple(draw(st.lists(tag_text, max_size=16, unique=True))),
        version=draw(st.integers(min_value=1, max_value=2**53)),
        created_at=created,
        updated_at=draw(st.integers(min_value=created, max_value=253402300799999)),
        session_id=draw(st.none() | any_text),
    )


@settings(max_examples=300, deadline=None)
@given(entries())
def test_codec_round_trip(entry: Entry) -> None:
    data = encode(entry)
    decoded = decode(data)
    assert decoded.entry == entry
    assert decoded.canonical
    assert data.split(b"\n---\n", 1)[1] == entry.text.encode("utf-8") + b"\n"
    assert encode(decoded.entry) == data


@settings(max_examples=200, deadline=None)
@given(entries())
def test_old_and_editor_forms_of_a_file_read_as_the_same_entry(entry: Entry) -> None:
    """Without the final newline (filemem before it wrote one; an editor that adds none)
    where the text does not end in one, and with every line ending turned into CRLF (an
    editor saving with Windows line endings): the same entry, always."""
    data = encode(entry)
    for form in encodings(entry):
        assert decode(form).entry == entry
    assert decode(data.replace(b"\n", b"\r\n")).entry == entry


@settings(max_examples=100, deadline=None)
@given(entries())
def test_canonical_form_means_the_same_to_a_yaml_parser(entry: Entry) -> None:
    """A comment line makes decode take the ruamel path; it must read the same entry."""
    data = encode(entry).replace(b"---\n", b"---\n# a person was here\n", 1)
    decoded = decode(data)
    assert not decoded.canonical
    assert decoded.entry == entry


HAND_MADE_EXTRAS = (
    "# kept by hand\n"
    "name: prefers-chinese\n"
    "description: \"The user prefers replies in Chinese\"\n"
    "metadata: {type: feedback}\n"
)


@settings(max_examples=60, deadline=None)
@given(entries(), entries())
def test_replace_of_a_hand_made_file_keeps_extras(old: Entry, new: Entry) -> None:
    previous = encode(old).replace(b"---\n", b"---\n" + HAND_MADE_EXTRAS.encode(), 1)
    assert decode(previous).extras == ("name", "description", "metadata")
    out = encode(new, previous=previous)
    decoded = decode(out)
    assert decoded.entry == new
    assert decoded.extras == ("name", "description", "metadata")
    assert out.split(b"\n---\n", 1)[1] == new.text.encode("utf-8") + b"\n"
    assert b"# kept by hand\n" in out


# ---------------------------------------------------------------- a failed write changes nothing

LIMIT = 200
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
SEEDED = [
    {**UG, "text": "alpha one"},
    {**UG, "text": "alpha two"},
    {**UG, "text": "beta unique entry", "tags": ["pref"]},
    {**UW, "text": "gamma in the workspace"},
    {**UW, "text": "delta in the workspace"},
]
USED_UG = sum(len(e["text"]) for e in SEEDED if e["scope"] == "user-global")
USED_UW = sum(len(e["text"]) for e in SEEDED if e["scope"] == "workspace")


@dataclass
class Store:
    provider: filemem.Provider
    path: Path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("props") / "store"
    budgets = {"user": {"userGlobal": LIMIT, "workspace": LIMIT},
               "agent": {"userGlobal": LIMIT, "workspace": LIMIT}}
    p = filemem.open_store(path, create=True, write_policy="auto", budgets=budgets)
    p.seed(SEEDED, ctx())
    yield Store(p, path)
    p.close()


def snapshot_of(s: Store) -> tuple[str, list[dict[str, Any]], list[Any], str]:
    return (git(s.path, "rev-parse", "HEAD"), s.provider.list_entries(),
            s.provider.audit_list(5), git(s.path, "status", "--porcelain"))


@dataclass
class Case:
    op: str
    arg: Any
    write: Any
    code: str


text_ok = st.text(stored_chars, min_size=1, max_size=30)
missing = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10).map(
    lambda s: "\u2603 no such entry " + s)  # the seeded texts have no snowman
bad_layer = st.one_of(
    st.fixed_dictionaries({"track": st.sampled_from(["team", "User", "", None, 1]),
                           "scope": st.sampled_from(["user-global", "workspace"])}),
    st.fixed_dictionaries({"track": st.sampled_from(["user", "agent"]),
                           "scope": st.sampled_from(["global", "Workspace", "", None, []])}),
    st.just({"scope": "workspace"}),
    st.just({"track": "user"}),
)
bad_text = st.sampled_from(["", None, 5, ["x"], "lone \ud800 surrogate"])
bad_tags = st.one_of(
    st.sampled_from(["pref", 5, {"a": 1}, [""], [" "], [1], ["a\tb"], ["a\x1f"], ["x" * 33]]),
    st.lists(st.from_regex(r"t[0-9]{1,3}", fullmatch=True), min_size=17, max_size=25,
             unique=True),
)
bad_match = st.sampled_from(["", None, 5, ["alpha"]])
bad_matches = st.one_of(
    st.sampled_from([[], "alpha one", None, [""], ["beta", 5], ["beta", ""]]),
    st.lists(st.just("beta"), min_size=21, max_size=25),
)
no_agent = st.sampled_from([None, {}, {"agent": None}, "agent", 5, []])
ops = st.sampled_from(["add", "replace", "remove", "consolidate", "seed"])


def good_arg(op: str, text: str) -> Any:
    """An argument that would succeed, to pair with a missing agent."""
    return {
        "add": {**UG, "text": text},
        "replace": {**UG, "match": "beta", "text": text},
        "remove": {**UG, "match": "beta"},
        "consolidate": {**UG, "matches": ["alpha one", "alpha two"], "text": text},
        "seed": [{**UG, "text": text}],
    }[op]


@st.composite
def failing_writes(draw: st.DrawFn) -> Case:
    kind: str = draw(st.sampled_from([
        "no agent", "bad layer", "bad text", "bad tags", "bad source", "bad match",
        "bad matches", "duplicate targets", "bad seed", "not found", "ambiguous",
        "over budget",
    ]))
    event(kind)
    w = ctx()
    text = draw(text_ok)
    inv = errors.INVALID_INPUT
    if kind == "no agent":
        op = draw(ops)
        # the agent check comes first, even before an input that is itself invalid
        arg = draw(st.sampled_from([good_arg(op, text), {"track": "x"}, None, []]))
        return Case(op, arg, draw(no_agent), errors.WRITE_REQUIRES_AGENT)
    if kind == "bad layer":
        op = draw(ops)
        layer = draw(bad_layer)
        if op == "seed":
            return Case(op, [{**UG, "text": "fine"}, {**layer, "text": text}], w, inv)
        arg = dict(good_arg(op, text))
        del arg["track"], arg["scope"]
        return Case(op, {**arg, **layer}, w, inv)
    if kind == "bad text":
        op = draw(st.sampled_from(["add", "replace", "consolidate", "seed"]))
        bad = draw(bad_text)
        if op == "seed":
            return Case(op, [{**UG, "text": "fine"}, {**UG, "text": bad}], w, inv)
        return Case(op, {**good_arg(op, text), "text": bad}, w, inv)
    if kind == "bad tags":
        op = draw(st.sampled_from(["add", "replace", "consolidate", "seed"]))
        tags = draw(bad_tags)
        if op == "seed":
            return Case(op, [{**UG, "text": text, "tags": tags}], w, inv)
        return Case(op, {**good_arg(op, text), "tags": tags}, w, inv)
    if kind == "bad source":
        op = draw(st.sampled_from(["add", "replace", "consolidate", "seed"]))
        source = draw(st.sampled_from([5, ["x"], {"a": 1}, "bad \udc80"]))
        if op == "seed":
            return Case(op, [{**UG, "text": text, "source": source}], w, inv)
        return Case(op, {**good_arg(op, text), "source": source}, w, inv)
    if kind == "bad match":
        op = draw(st.sampled_from(["replace", "remove"]))
        return Case(op, {**good_arg(op, text), "match": draw(bad_match)}, w, inv)
    if kind == "bad matches":
        return Case("consolidate", {**UG, "matches": draw(bad_matches), "text": text}, w, inv)
    if kind == "duplicate targets":
        matches = draw(st.sampled_from([["alpha one", "one"], ["beta", "BETA"],
                                        ["alpha two", "two", "alpha one"]]))
        return Case("consolidate", {**UG, "matches": matches, "text": text}, w, inv)
    if kind == "bad seed":
        arg = draw(st.sampled_from([[], None, {"text": "x"}, "x", [None], [{**UG}]]))
        return Case("seed", arg, w, inv)
    if kind == "not found":
        op = draw(st.sampled_from(["replace", "remove", "consolidate"]))
        layer = draw(st.sampled_from([UG, UW]))
        m = draw(missing)
        if op == "consolidate":
            arg = {**layer, "matches": ["gamma" if layer is UW else "beta", m], "text": text}
        else:
            arg = {**good_arg(op, text), **layer, "match": m}
        # another session's workspace sees none of this one's workspace entries
        other = draw(st.booleans()) and layer is UW and op != "consolidate"
        if other:
            arg["match"] = "gamma"
        return Case(op, arg, ctx(cwd="/elsewhere") if other else w, errors.ENTRY_NOT_FOUND)
    if kind == "ambiguous":
        op = draw(st.sampled_from(["replace", "remove", "consolidate"]))
        m, layer = draw(st.sampled_from([("alpha", UG), ("ALPHA", UG), ("a", UG),
                                         ("in the workspace", UW), ("THE WORK", UW)]))
        if op == "consolidate":
            arg = {**layer, "matches": [m], "text": text}
        else:
            arg = {**good_arg(op, text), **layer, "match": m}
        return Case(op, arg, w, errors.AMBIGUOUS_MATCH)
    # over budget: one code unit (or more) past the limit; emoji count twice
    code = errors.BUDGET_EXCEEDED
    op = draw(st.sampled_from(["add", "replace", "consolidate", "seed"]))
    extra = draw(st.integers(min_value=1, max_value=50))
    unit = draw(st.sampled_from(["x", "你", "😀"]))

    def sized(n: int) -> str:
        return unit * (n // utf16_len(unit)) + "x" * (n % utf16_len(unit))

    if op == "add":
        layer, used = draw(st.sampled_from([(UG, USED_UG), (UW, USED_UW)]))
        return Case(op, {**layer, "text": sized(LIMIT - used + extra)}, w, code)
    if op == "replace":
        n = LIMIT - USED_UG + len("beta unique entry") + extra
        return Case(op, {**UG, "match": "beta", "text": sized(n)}, w, code)
    if op == "consolidate":
        n = LIMIT - USED_UG + len("alpha one") + len("alpha two") + extra
        return Case(op, {**UG, "matches": ["alpha one", "alpha two"], "text": sized(n)}, w,
                    code)
    # seed: a fine group first, then a group that overflows across several entries
    parts = [sized(LIMIT - USED_UW + extra - 10), sized(10)]
    return Case(op, [{**UG, "text": "fits"}] + [{**UW, "text": t} for t in parts], w, code)


@settings(max_examples=40, deadline=None)
@given(case=failing_writes())
def test_a_failed_write_changes_nothing(store: Store, case: Case) -> None:
    before = snapshot_of(store)
    with pytest.raises(filemem.ProtocolError) as info:
        getattr(store.provider, case.op)(case.arg, case.write)
    assert info.value.code == case.code, (case, info.value)
    assert snapshot_of(store) == before


def test_the_store_is_clean_after_all_the_failures(store: Store) -> None:
    assert sorted(e["text"] for e in store.provider.list_entries()) == \
        sorted(e["text"] for e in SEEDED)
    assert_clean_repo(store.path)
    assert [b["used"] for b in store.provider.budgets()] == [USED_UG, USED_UW, 0, 0]
