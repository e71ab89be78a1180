"""Unit tests for filemem.files.codec: entry file format, byte-exact bodies, hand-made files,
guards."""

from __future__ import annotations

import contextlib
import difflib
import signal
from typing import Any

import pytest

from filemem.files import codec
from filemem.files.codec import FIELDS, CodecError, decode, encode
from filemem.model import Entry, validate_meta

UUID = "0f7c1b1e-4a5b-4c3d-9e8f-001122334455"
T0 = 1700000000123


def make_entry(**changes: Any) -> Entry:
    fields: dict[str, Any] = dict(
        id=UUID, track="user", scope="user-global", workspace_key="", agent_key="",
        text="Prefers replies in Chinese\n", source="dsh-memento", tags=("pref", "lang"),
        version=1, created_at=T0, updated_at=T0, session_id="s1")
    fields.update(changes)
    return Entry(**fields)


def head_of(data: bytes) -> list[str]:
    """The front-matter lines between the two ``---`` lines."""
    lines = data.split(b"\n---\n", 1)[0].decode("utf-8").split("\n")
    assert lines[0] == "---"
    return lines[1:]


HAND_MADE = """\
# Claude Code memory file, edited by hand
name: prefers-chinese
description: "The user prefers replies in Chinese"
metadata: {type: feedback}
id: 0f7c1b1e-4a5b-4c3d-9e8f-001122334455
track: user
scope: user-global
workspaceKey: ""
agentKey: ""
source: claude
# the tags, one per line
tags:
  - pref
  - lang
version: 1
createdAt: 2023-11-14T22:13:20.123Z
updatedAt: 2023-11-14T22:13:20.123Z
sessionId: null
notes: |
  track: agent
  (this is text, not a key)
"""


def hand_made(head: str = HAND_MADE, body: bytes = b"Prefers Chinese.\n") -> bytes:
    return b"---\n" + head.encode("utf-8") + b"---\n" + body


# ---------------------------------------------------------------- byte-exact round trip


TEXTS = [
    "x",
    "  leading and trailing whitespace  ",
    "\n\nblank lines around\n\n",
    "line one\r\nline two\r\n",
    "lone CR\rin the middle",
    "before\n---\nafter",
    "---",
    "---\n",
    "---\nid: 0f7c1b1e-4a5b-4c3d-9e8f-001122334455\n---\n",
    "--- not a delimiter",
    "key: value\ntags: [a, b]\n- item\n? complex\n&anchor *alias !!python/object",
    "# a comment-looking line\n...\n",
    "偏好中文回复，测试先于实现。",
    "emoji 😀👩‍💻 and flags 🇨🇳",
    "tab\tand\x1fcontrols\x7f\u0085\u2028\u2029\ufeff",
    "\ufeffstarts with a BOM",
    "y" * 200_000,
    ("a very long line " * 5000).strip(),
    "no trailing newline",
    "trailing newline\n",
    "   ",
    "\n",
    "\r\n",
]


@pytest.mark.parametrize("text", ["NUL\x00inside", "\x00"])
def test_a_body_holding_nul_is_not_an_entry(text: str) -> None:
    """An entry's text goes into its commits' messages, which git cannot give a NUL."""
    data = encode(make_entry(text="placeholder")).replace(b"placeholder", text.encode())
    with pytest.raises(CodecError, match=r"holds a NUL character \(U\+0000\) at index"):
        decode(data)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_body_round_trips_byte_exact(text: str) -> None:
    entry = make_entry(text=text)
    data = encode(entry)
    # the text, then the file's own final newline (schemas/entry-file.md)
    assert data.endswith(b"\n---\n" + text.encode("utf-8") + b"\n")
    decoded = decode(data)
    assert decoded.entry == entry
    assert decoded.entry.text == text
    assert decoded.canonical
    assert decoded.extras == ()


@pytest.mark.parametrize(
    "value",
    ["", "yes", "No", "null", "~", "true", "1", "1.5", "0x10", "-", "- x", "a: b", "#x", "a #b",
     "[x]", "{x}", "&a", "*a", "!x", "'q'", '"q"', "C:\\work\\proj", "/work/proj", "<<",
     " lead", "trail ", "new\nline", "tab\there", "\x00", "\u0085", "\u2028", "\ufeff", "你好",
     "😀", "=", "@x", "`x`", "%x", "|", ">", "?", "inf", ".inf", ".NaN", "2023-11-14",
     "12:30:00", "0o17", "1_000", "Null", "NULL", "y", "n", "on", "OFF"],
)
def test_key_and_source_values_round_trip(value: str) -> None:
    entry = make_entry(scope="workspace", workspace_key=value, agent_key=value,
                       source=value or "s", session_id=value)
    decoded = decode(encode(entry))
    assert decoded.entry == entry
    assert decoded.canonical
    # the same bytes read through the YAML path (a comment line forces it) mean the same
    via_yaml = decode(encode(entry).replace(b"---\n", b"---\n# comment\n", 1))
    assert not via_yaml.canonical
    assert via_yaml.entry == entry


@pytest.mark.parametrize(
    "tags", [(), ("a",), ("with space", "with,comma", "quote\"d", "[x]", "yes", "1", "你好",
                          "😀", "a\u0085", "back\\slash", "#hash", "a: b")],
)
def test_tags_round_trip(tags: tuple[str, ...]) -> None:
    entry = make_entry(tags=tags)
    assert decode(encode(entry)).entry == entry
    assert decode(encode(entry).replace(b"---\n", b"---\n# c\n", 1)).entry == entry


def test_session_id_null_and_string_are_distinct() -> None:
    assert decode(encode(make_entry(session_id=None))).entry.session_id is None
    assert decode(encode(make_entry(session_id="null"))).entry.session_id == "null"


# ---------------------------------------------------------------- canonical shape


def test_canonical_shape() -> None:
    data = encode(make_entry())
    assert data.startswith(b"---\n")
    lines = head_of(data)
    assert [line.split(":", 1)[0] for line in lines] == list(FIELDS)
    assert lines == [
        f"id: {UUID}",
        "track: user",
        "scope: user-global",
        'workspaceKey: ""',
        'agentKey: ""',
        "source: dsh-memento",
        "tags: [pref, lang]",
        "version: 1",
        "createdAt: 2023-11-14T22:13:20.123Z",
        "updatedAt: 2023-11-14T22:13:20.123Z",
        "sessionId: s1",
    ]
    # the text ends in a newline of its own; the last one is the file's
    assert data == ("---\n" + "\n".join(lines) + "\n---\nPrefers replies in Chinese\n\n").encode()


def test_canonical_is_stable() -> None:
    entry = make_entry()
    first = encode(entry)
    assert encode(decode(first).entry) == first
    assert encode(entry, previous=first) == first


def test_ids_are_quoted_without_filling_the_quote_cache() -> None:
    # a long-running server encodes every entry (the view cache's check): ids, new in every
    # file, must not fill the cache kept for the values files share
    entries = [make_entry(id=f"0f7c1b1e-4a5b-4c3d-9e8f-{i:012d}") for i in range(300)]
    encode(entries[0])
    before = codec.quote.cache_info().currsize
    files = [encode(e) for e in entries]
    assert codec.quote.cache_info().currsize == before
    assert [decode(f).entry.id for f in files] == [e.id for e in entries]


def test_replace_changes_exactly_the_changed_lines() -> None:
    old = make_entry(text="old text\nsecond line\n")
    new = old.revised(text="new text\nsecond line\n", version=2, updated_at=T0 + 5000,
                      session_id="s2")
    before = encode(old).decode().splitlines()
    after = encode(new, previous=encode(old)).decode().splitlines()
    diff = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert sorted(diff) == sorted([
        "-version: 1", "+version: 2",
        "-updatedAt: 2023-11-14T22:13:20.123Z", "+updatedAt: 2023-11-14T22:13:25.123Z",
        "-sessionId: s1", "+sessionId: s2",
        "-old text", "+new text",
    ])


def test_tags_change_is_one_line() -> None:
    old = make_entry()
    new = old.revised(tags=("pref",))
    diff = list(difflib.ndiff(encode(old).decode().splitlines(),
                              encode(new).decode().splitlines()))
    assert [d for d in diff if d[:1] in "+-"] == ["- tags: [pref, lang]", "+ tags: [pref]"]


# ---------------------------------------------------------------- hand-made front-matter


def test_hand_made_front_matter_parses() -> None:
    decoded = decode(hand_made())
    assert not decoded.canonical
    assert decoded.extras == ("name", "description", "metadata", "notes")
    assert decoded.entry == make_entry(text="Prefers Chinese.", source="claude",
                                       session_id=None)


def test_replace_of_hand_made_file_keeps_extra_keys_and_comments() -> None:
    old = hand_made()
    entry = decode(old).entry
    new = entry.revised(text="Prefers replies in Chinese.\n", version=2, updated_at=T0 + 1,
                        tags=("pref",), session_id="s2")
    out = encode(new, previous=old)
    decoded = decode(out)
    assert decoded.entry == new
    assert decoded.extras == ("name", "description", "metadata", "notes")
    text = out.decode("utf-8")
    for kept in ("# Claude Code memory file, edited by hand\n",
                 "name: prefers-chinese\n",
                 'description: "The user prefers replies in Chinese"\n',
                 "metadata: {type: feedback}\n",
                 "# the tags, one per line\n",
                 "notes: |\n  track: agent\n  (this is text, not a key)\n"):
        assert kept in text
    assert out.endswith(b"\n---\nPrefers replies in Chinese.\n\n")
    # only protocol lines changed; every line of the person's own survives in order
    own = [line for line in HAND_MADE.splitlines()
           if line.split(":", 1)[0] not in FIELDS and not line.startswith("  - ")]
    assert [line for line in text.splitlines() if line in own] == own


def test_replace_of_hand_made_file_keeps_metadata_value() -> None:
    old = hand_made(HAND_MADE.replace("metadata: {type: feedback}\n",
                                      "metadata:\n  type: feedback\n  origin: claude-code\n"))
    entry = decode(old).entry
    out = encode(entry.revised(version=2), previous=old)
    assert b"metadata:\n  type: feedback\n  origin: claude-code\n" in out
    assert decode(out).entry.version == 2


def test_replace_of_hand_made_column0_block_list() -> None:
    head = HAND_MADE.replace("tags:\n  - pref\n  - lang\n", "tags:\n- pref\n- lang\n")
    old = hand_made(head)
    assert decode(old).entry.tags == ("pref", "lang")
    new = decode(old).entry.revised(tags=("x",), version=2)
    out = encode(new, previous=old)
    assert decode(out).entry == new
    assert b"\n- pref" not in out


def test_replace_adds_protocol_keys_missing_from_layout_order() -> None:
    """Keys are written where they were; a file with keys in another order keeps that order."""
    head = "sessionId: null\n" + "\n".join(
        line for line in HAND_MADE.splitlines() if not line.startswith("sessionId")) + "\n"
    old = hand_made(head)
    new = decode(old).entry.revised(session_id="s9", version=2)
    out = encode(new, previous=old)
    assert head_of(out)[0] == "sessionId: s9"
    assert decode(out).entry == new


def test_replace_of_hand_made_file_keeps_unchanged_protocol_lines() -> None:
    head = HAND_MADE.replace("source: claude\n", "source: claude   # imported by hand\n")
    old = hand_made(head)
    out = encode(decode(old).entry.revised(version=2), previous=old).decode()
    assert "source: claude   # imported by hand\n" in out
    assert f"\nid: {UUID}\n" in out


def test_bom_and_crlf_front_matter() -> None:
    head = HAND_MADE.replace("\n", "\r\n")
    data = b"\xef\xbb\xbf---\r\n" + head.encode() + b"---\r\nbody\r\n"
    decoded = decode(data)
    # CRLF throughout (a Windows editor's file) reads as LF: the last line end is the file's
    assert decoded.entry.text == "body"
    assert decoded.entry.source == "claude"
    out = encode(decoded.entry.revised(version=2), previous=data)
    assert decode(out).entry == decoded.entry.revised(version=2)
    assert b"name: prefers-chinese\n" in out and b"\r" not in out


def test_offset_timestamps_are_read_as_utc() -> None:
    head = HAND_MADE.replace("createdAt: 2023-11-14T22:13:20.123Z",
                             "createdAt: 2023-11-14T23:13:20.123+01:00")
    assert decode(hand_made(head)).entry.created_at == T0


# ---------------------------------------------------------------- guards


def broken(old: str, new: str, body: bytes = b"x") -> bytes:
    assert old in HAND_MADE
    return hand_made(HAND_MADE.replace(old, new, 1), body)


def codec_error(data: bytes) -> str:
    with pytest.raises(CodecError) as info:
        decode(data)
    return str(info.value)


GUARDS: list[tuple[str, bytes, str]] = [
    ("alias", broken("source: claude\n", "source: &src claude\nname2: *src\n"), "YAML"),
    ("anchor", broken("source: claude\n", "source: &src claude\n"), "anchor"),
    ("python tag", broken("name: prefers-chinese\n",
                          "name: !!python/object:os.system echo\n"), "tag"),
    ("local tag", broken("name: prefers-chinese\n", "name: !mine x\n"), "tag"),
    ("too big", broken("name: prefers-chinese\n", "# " + "x" * 70_000 + "\n"), "larger"),
    ("too big unclosed", b"---\n" + b"a: b\n" * 20_000, "larger"),
    # deep enough for a RecursionError, shallow enough to be quick (see the timing test)
    ("nested flow", broken("name: prefers-chinese\n", "name: " + "[" * 500 + "]" * 500 + "\n"),
     "nested"),
    ("nested flow maps", broken("name: prefers-chinese\n",
                                "name: " + "{a: " * 5000 + "}" * 5000 + "\n"), "nested"),
    ("duplicate key", broken("version: 1\n", "version: 1\nversion: 2\n"), "duplicate"),
    ("duplicate extra key", broken("name: prefers-chinese\n", "name: a\nname: b\n"), "duplicate"),
    ("missing key", broken("sessionId: null\n", ""), "sessionId"),
    ("missing keys", broken("track: user\nscope: user-global\n", ""), "track, scope"),
    ("version x", broken("version: 1\n", "version: x\n"), "version"),
    ("version 0", broken("version: 1\n", "version: 0\n"), "version"),
    ("version bool", broken("version: 1\n", "version: true\n"), "version"),
    ("version float", broken("version: 1\n", "version: 1.5\n"), "version"),
    ("tags string", broken("tags:\n  - pref\n  - lang\n", "tags: pref\n"), "tags"),
    ("tags map", broken("tags:\n  - pref\n  - lang\n", "tags: {a: 1}\n"), "tags"),
    ("tags ints", broken("tags:\n  - pref\n  - lang\n", "tags: [1, 2]\n"), "tags"),
    ("tags untrimmed", broken("tags:\n  - pref\n  - lang\n", "tags: [' a']\n"), "tags"),
    ("tags duplicate", broken("tags:\n  - pref\n  - lang\n", "tags: [a, a]\n"), "tags"),
    ("tags control", broken("tags:\n  - pref\n  - lang\n", 'tags: ["a\\tb"]\n'), "tags"),
    ("track team", broken("track: user\n", "track: team\n"), "track"),
    ("scope global", broken("scope: user-global\n", "scope: global\n"), "scope"),
    ("bad id", broken(f"id: {UUID}\n", "id: 42\n"), "id"),
    ("user-global with workspace", broken('workspaceKey: ""\n', "workspaceKey: /w\n"),
     "workspaceKey"),
    ("agentKey number", broken('agentKey: ""\n', "agentKey: 5\n"), "agentKey"),
    ("empty source", broken("source: claude\n", 'source: ""\n'), "source"),
    ("sessionId number", broken("sessionId: null\n", "sessionId: 5\n"), "sessionId"),
    ("bad timestamp", broken("createdAt: 2023-11-14T22:13:20.123Z\n", "createdAt: yesterday\n"),
     "createdAt"),
    ("time goes back", broken("createdAt: 2023-11-14T22:13:20.123Z\n",
                              "createdAt: 2024-11-14T22:13:20.123Z\n"), "earlier"),
    ("non-UTF-8 body", broken("x", "x", b"\xff\xfe text"), "UTF-8"),
    ("truncated UTF-8 body", broken("x", "x", "你".encode()[:2]), "UTF-8"),
    ("empty body", broken("x", "x", b""), "empty"),
    ("non-UTF-8 front-matter", hand_made().replace(b"prefers-chinese", b"\xff\xfe"), "UTF-8"),
    ("no front-matter", b"just text\n", "front-matter"),
    ("empty file", b"", "front-matter"),
    ("no newline after ---", b"---id: x\n---\nx", "front-matter"),
    ("unclosed", b"---\n" + HAND_MADE.encode(), "closed"),
    ("a list", b"---\n- a\n- b\n---\nx", "mapping"),
    ("a scalar", b"---\njust words\n---\nx", "mapping"),
    ("empty front-matter", b"---\n---\nx", "mapping"),
    ("invalid YAML", broken("name: prefers-chinese\n", "name: [unclosed\n"), "YAML"),
    ("control char in YAML", broken("name: prefers-chinese\n", "name: a\x01b\n"), "YAML"),
    ("non-string key", broken("name: prefers-chinese\n", "1: one\n"), "key"),
    ("complex key", broken("name: prefers-chinese\n", "? [a, b]\n: c\n"), "key"),
]


@pytest.mark.parametrize(("data", "needle"), [(d, n) for _, d, n in GUARDS],
                         ids=[name for name, _, _ in GUARDS])
def test_bad_files_raise_codec_error_with_a_useful_message(data: bytes, needle: str) -> None:
    message = codec_error(data)
    assert needle in message


def test_canonical_lookalike_with_bad_values_is_rejected() -> None:
    data = encode(make_entry())
    assert "version" in codec_error(data.replace(b"version: 1\n", b'version: "1"\n'))
    assert "track" in codec_error(data.replace(b"track: user\n", b"track: team\n"))


def test_merge_key_is_rejected() -> None:
    data = broken("track: user\n", "<<: {track: agent}\n")
    assert "merge" in codec_error(data)


@pytest.mark.parametrize("value", ["!!python/object/apply:os.system [ls]",
                                   "!!python/object:os.system {a: 1}", "!!set {a, b}",
                                   "!mine [a]"])
def test_tagged_collection_message_names_the_tag(value: str) -> None:
    message = codec_error(broken("name: prefers-chinese\n", f"name: {value}\n"))
    assert "tag" in message


@pytest.mark.parametrize("value", ["!!python/object/apply:os.system [ls]", "!mine [a]"])
def test_tagged_collection_is_still_a_codec_error(value: str) -> None:
    codec_error(broken("name: prefers-chinese\n", f"name: {value}\n"))


class _Slow(BaseException):
    """Raised by the timer; a BaseException so the codec's own handlers cannot swallow it."""


def test_deeply_nested_flow_is_rejected_quickly() -> None:
    data = broken("name: prefers-chinese\n", "name: " + "[" * 5000 + "]" * 5000 + "\n")

    def alarm(signum: int, frame: Any) -> None:
        raise _Slow

    slow = False
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        codec_error(data)
    except _Slow:
        slow = True  # fail outside the handler: no chained traceback from inside ruamel
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not slow, "decode took more than 1 s"


def test_front_matter_just_under_the_cap_is_read() -> None:
    padding = "# " + "x" * (codec.FRONT_MATTER_MAX - len(HAND_MADE.encode()) - 10) + "\n"
    decoded = decode(hand_made(padding + HAND_MADE))
    assert decoded.entry.source == "claude"


def test_guards_never_leak_other_exception_types() -> None:
    """Odd inputs, byte by byte truncations of a valid file: CodecError or success only."""
    data = hand_made()
    for cut in range(0, len(data), 7):
        with contextlib.suppress(CodecError):
            decode(data[:cut])


# ---------------------------------------------------------------- x-<name> metadata


META = validate_meta({
    "x-mem0": {"key": "f38b689d", "textSha256": "ab" * 32,
               "data": {"item": {"id": "f38b689d", "memory": None, "score": 0.25,
                                 "nested": [{"a": [1, True, None]}]}}},
    "x-claude-code-memory-md": {"data": {"prefix": "---\nname: x\n---\n", "odd":
                                         "\u2028\u0085\ufeff\x7f \"q\" \\ # : {}"}},
})


def test_metadata_is_one_sorted_json_line_per_key_after_the_fields() -> None:
    data = encode(make_entry(meta=META))
    lines = head_of(data)
    assert lines[:len(FIELDS)] == head_of(encode(make_entry()))
    assert [line.split(":", 1)[0] for line in lines[len(FIELDS):]] == \
        ["x-claude-code-memory-md", "x-mem0"]
    # the characters some tools break lines at are escaped; the line is still the JSON
    assert "\\u2028\\u0085\\ufeff\\u007f" in lines[len(FIELDS)]
    got = decode(data)
    assert got.canonical and got.entry == make_entry(meta=META)
    assert got.entry.metadata()["x-mem0"]["data"]["item"]["nested"] == [{"a": [1, True, None]}]
    # any YAML reader reads the same values
    from ruamel.yaml import YAML

    loaded = YAML(typ="safe", pure=True).load(data.split(b"\n---\n", 1)[0][4:].decode())
    assert {k: loaded[k] for k in ("x-mem0", "x-claude-code-memory-md")} == \
        got.entry.metadata()


def test_metadata_survives_a_replace_and_hand_written_forms_are_read() -> None:
    data = encode(make_entry(meta=META))
    replaced = make_entry(meta=META, text="new text", version=2)
    assert decode(encode(replaced, data)).entry == replaced
    # a person's block YAML with a comment: read through ruamel, kept on replace as written
    hand = HAND_MADE + "x-mem0:  # what mem0 had\n  key: k1\n  data: {item: {id: k1}}\n" \
        "x-broken: [not, an, object]\nx-date: 2026-01-01\n"
    got = decode(f"---\n{hand}---\nbody".encode())
    assert not got.canonical
    assert got.entry.metadata() == {"x-mem0": {"key": "k1", "data": {"item": {"id": "k1"}}}}
    assert {"x-broken", "x-date", "x-mem0"} <= set(got.extras)  # kept as the file's own keys
    again = encode(got.entry.revised(text="other", version=2), f"---\n{hand}---\nbody".encode())
    assert "x-mem0:  # what mem0 had\n  key: k1\n" in again.decode()
    assert decode(again).entry.meta == got.entry.meta


@pytest.mark.parametrize(("line", "meta"), [
    ('x-a: {"k": 1, "k": 2}', None),  # a duplicate key: refused by the YAML guard
    ('x-b: {"k": NaN}', (("x-b", '{"k": "NaN"}'),)),  # not JSON: YAML reads a string
    ('x-B: {"k": 1}', ()),  # not an x-<name> key: the file's own
    ('x-c: {"k": 1}\nx-c2: {"k": 2}\nx-a: {"k": 0}', (("x-a", '{"k": 0}'), ("x-c", '{"k": 1}'),
                                                   ("x-c2", '{"k": 2}'))),  # unsorted
])
def test_metadata_lines_not_written_by_filemem_go_through_the_guarded_reader(
        line: str, meta: Any) -> None:
    data = encode(make_entry()).replace(b"sessionId: s1\n", f"sessionId: s1\n{line}\n".encode())
    if meta is None:
        with pytest.raises(CodecError, match="duplicate"):
            decode(data)
        return
    got = decode(data)
    assert not got.canonical and got.entry.meta == meta


def test_metadata_rules() -> None:
    from filemem.errors import ProtocolError

    for bad, needle in [({"x-": {}}, "must be x-<name>"), ({"y-a": {}}, "must be x-<name>"),
                        ({"x-a": []}, "must be an object"),
                        ({"x-a": {"n": float("nan")}}, "is not JSON"),
                        ({"x-a": {"s": {1, 2}}}, "is not JSON"),
                        ({"x-a": {"d": "\ud800"}}, "not valid Unicode"),
                        ({"x-a": {"d": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}, "nested more"),
                        ({"x-a": {"d": "x" * 40_000}}, "more than 32,768"), ([], "an object")]:
        with pytest.raises(ProtocolError) as info:
            validate_meta(bad)
        assert info.value.code == "INVALID_INPUT" and needle in info.value.message, bad
    assert validate_meta(None) == () and validate_meta({}) == ()


@pytest.mark.parametrize(("head", "said"), [
    ("track: nope", "track must be one of user|agent (got 'nope')"),
    ("scope: everywhere", "scope must be one of user-global|workspace (got 'everywhere')"),
    ("track: user", "front-matter is missing id, scope,"),
])
def test_a_hand_written_file_s_wrong_track_or_scope_is_named_before_missing_keys(
        head: str, said: str) -> None:
    """A file a person wrote gives a key or two (adopting fills in the rest): a wrong
    value among them is what to mend, so it is named first."""
    with pytest.raises(CodecError) as info:
        decode(f"---\n{head}\n---\na note\n".encode())
    assert said in str(info.value)
