"""Unit tests for filemem.model: lengths, trimming, tags, layers, keys, timestamps, validators."""

from __future__ import annotations

import copy
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from filemem import errors, jsstr, model
from filemem.errors import ProtocolError
from filemem.jsstr import js_trim, utf16_len
from filemem.model import (
    Entry,
    agent_key_of,
    iso_ms,
    normalize_tags,
    parse_iso_ms,
    validate_layer,
    validate_protocol_entry,
    validate_text,
    workspace_key_of,
)

UUID = "0f7c1b1e-4a5b-4c3d-9e8f-001122334455"
SCOPE_HELP = "(track \u2208 user|agent, scope \u2208 user-global|workspace)"


def invalid(fn: Any, *args: Any, **kwargs: Any) -> str:
    """Call ``fn`` expecting INVALID_INPUT; return the message."""
    with pytest.raises(ProtocolError) as info:
        fn(*args, **kwargs)
    assert info.value.code == errors.INVALID_INPUT
    assert info.value.details == {}
    return info.value.message


# ---------------------------------------------------------------- lengths and trimming


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("abc", 3),
        ("你好", 2),
        ("偏好中文回复", 6),
        ("😀", 2),
        ("a😀b", 4),
        ("👩‍💻", 5),  # woman + ZWJ + laptop: 2 + 1 + 2
        ("\U0010ffff", 2),
        ("é", 1),
    ],
)
def test_utf16_len_counts_code_units(text: str, expected: int) -> None:
    assert utf16_len(text) == expected


def test_utf16_prefix_never_splits_a_surrogate_pair() -> None:
    assert jsstr.utf16_prefix("a😀b", 2) == "a"
    assert jsstr.utf16_prefix("a😀b", 3) == "a😀"
    assert jsstr.utf16_prefix("abc", 10) == "abc"


def test_excerpt_cuts_with_ellipsis_only_when_longer() -> None:
    assert jsstr.excerpt("x" * 300, 300) == "x" * 300
    assert jsstr.excerpt("x" * 301, 300) == "x" * 300 + "\u2026"


@pytest.mark.parametrize(
    "ws", ["\ufeff", "\u3000", "\u00a0", "\u2028", "\u2029", "\u202f", "\u205f", "\u1680",
           "\u2000", "\u200a", "\t", "\n", "\v", "\f", "\r", " "],
)
def test_js_trim_removes_the_ecmascript_whitespace_set(ws: str) -> None:
    assert js_trim(f"{ws}a b{ws}") == "a b"


@pytest.mark.parametrize("kept", ["\u0085", "\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\u180e"])
def test_js_trim_keeps_what_python_strip_would_remove_or_js_keeps(kept: str) -> None:
    """U+0085 and U+001C..U+001F are whitespace to Python but not to JavaScript."""
    assert js_trim(f"{kept}a{kept}") == f"{kept}a{kept}"


# ---------------------------------------------------------------- tags


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, []),
        ([], []),
        (["b", " a ", "a", "b"], ["b", "a"]),
        (["a ", "a", "b"], ["a", "b"]),
        ([" a\n"], ["a"]),
        (["A", "a"], ["A", "a"]),  # dedupe is case-sensitive
        (["a\u0085"], ["a\u0085"]),  # U+0085 is neither trimmed nor a control character
        (["\u3000x\ufeff"], ["x"]),
        (["a\u200bb"], ["a\u200bb"]),  # zero-width characters are allowed
        (["x" * 32], ["x" * 32]),
        (["你" * 32], ["你" * 32]),
        (["same"] * 20, ["same"]),  # the 16-tag cap counts after dedupe
        ([f"t{i}" for i in range(16)], [f"t{i}" for i in range(16)]),
        (("x", "y"), ["x", "y"]),
    ],
)
def test_normalize_tags(raw: Any, expected: list[str]) -> None:
    assert normalize_tags(raw) == expected


@pytest.mark.parametrize("raw", ["x", {"a": 1}, 5, "a,b"])
def test_normalize_tags_rejects_non_arrays(raw: Any) -> None:
    assert invalid(normalize_tags, raw) == "entry tags must be an array of strings"


@pytest.mark.parametrize("raw", [[1], ["a", None], ["a", ["b"]], [True]])
def test_normalize_tags_rejects_non_string_items(raw: Any) -> None:
    assert invalid(normalize_tags, raw) == "entry tags must be an array of strings"


@pytest.mark.parametrize("raw", [[""], ["   "], ["a", "\u3000\ufeff"], ["\n\t"]])
def test_normalize_tags_rejects_empty_tags(raw: list[str]) -> None:
    assert invalid(normalize_tags, raw) == "entry tags must be non-empty strings"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\tb", '"a\\tb"'),
        ("a\x1f", '"a\\u001f"'),  # JS trim keeps U+001F, so the tag is rejected, not stripped
        ("\x1ca", '"\\u001ca"'),
        ("a\x00", '"a\\u0000"'),
        ("a\x7fb", '"a\x7fb"'),
        ("x\ny", '"x\\ny"'),
    ],
)
def test_normalize_tags_rejects_control_characters(raw: str, shown: str) -> None:
    assert invalid(normalize_tags, [raw]) == f"entry tag {shown} contains control characters"


def test_normalize_tags_allows_c1_controls() -> None:
    assert normalize_tags(["a\u0080b\u009f"]) == ["a\u0080b\u009f"]


def test_long_tag_message_shows_a_20_unit_prefix_and_ellipsis() -> None:
    tag = "abcdefghijklmnopqrstuvwxyz0123456"  # 33
    assert invalid(normalize_tags, [tag]) == (
        'entry tag "abcdefghijklmnopqrst"\u2026 exceeds 32 chars'
    )


def test_long_tag_is_measured_after_trimming() -> None:
    assert normalize_tags(["  " + "x" * 32 + "  "]) == ["x" * 32]


def test_long_tag_counts_utf16_units() -> None:
    # 17 emoji = 34 code units > 32; 16 emoji = 32 is fine
    assert normalize_tags(["😀" * 16]) == ["😀" * 16]
    message = invalid(normalize_tags, ["😀" * 17])
    assert message == f'entry tag "{"😀" * 10}"\u2026 exceeds 32 chars'


def test_control_check_runs_before_length_check() -> None:
    assert invalid(normalize_tags, ["x" * 40 + "\t" + "y"]).endswith("contains control characters")


def test_too_many_tags_counted_after_dedupe() -> None:
    raw = [f"t{i}" for i in range(17)]
    assert invalid(normalize_tags, raw) == "entry has 17 tags; at most 16 are allowed"
    assert invalid(normalize_tags, raw + raw) == "entry has 17 tags; at most 16 are allowed"


def test_first_bad_tag_wins() -> None:
    assert invalid(normalize_tags, ["", 1]) == "entry tags must be non-empty strings"
    assert invalid(normalize_tags, [1, ""]) == "entry tags must be an array of strings"


def test_tag_with_lone_surrogate_is_rejected() -> None:
    assert "not valid Unicode" in invalid(normalize_tags, ["a\ud800"])


# ---------------------------------------------------------------- layer and text


@pytest.mark.parametrize(("track", "scope"), model.LAYERS)
def test_validate_layer_accepts_the_four_layers(track: str, scope: str) -> None:
    assert validate_layer(track, scope) == (track, scope)


@pytest.mark.parametrize(
    ("track", "scope", "kwargs", "shown"),
    [
        ("team", "workspace", {}, 'track="team" scope="workspace"'),
        ("user", "global", {}, 'track="user" scope="global"'),
        ("User", "workspace", {}, 'track="User" scope="workspace"'),
        (None, None, {}, "track=null scope=null"),
        (None, "workspace", {"track_missing": True}, 'track=undefined scope="workspace"'),
        ("user", None, {"scope_missing": True}, 'track="user" scope=undefined'),
        (None, None, {"track_missing": True, "scope_missing": True},
         "track=undefined scope=undefined"),
        (1, "workspace", {}, 'track=1 scope="workspace"'),
        (["user"], "workspace", {}, 'track=["user"] scope="workspace"'),
        ("user", "user-global ", {}, 'track="user" scope="user-global "'),
    ],
)
def test_validate_layer_message(track: Any, scope: Any, kwargs: dict[str, bool],
                                shown: str) -> None:
    message = invalid(validate_layer, track, scope, **kwargs)
    assert message == f"invalid memory scope: {shown} {SCOPE_HELP}"


@pytest.mark.parametrize("text", ["x", "   ", "\n", "line1\nline2", "你好", "😀", "\x01"])
def test_validate_text_accepts_any_non_empty_string_but_nul(text: str) -> None:
    assert validate_text(text) == text


@pytest.mark.parametrize("text", ["\x00", "a\x00b", "你好\x00"])
def test_validate_text_rejects_nul(text: str) -> None:
    message = invalid(validate_text, text)
    assert message.startswith("entry text holds a NUL character (U+0000) at index ")


@pytest.mark.parametrize("text", ["", None, 5, ["x"], b"x"])
def test_validate_text_rejects(text: Any) -> None:
    assert invalid(validate_text, text) == "entry text must be a non-empty string"


@pytest.mark.parametrize("text", ["a\ud800", "\udfff", "x\udc00y"])
def test_validate_text_rejects_lone_surrogates(text: str) -> None:
    message = invalid(validate_text, text)
    assert message.startswith("entry text is not valid Unicode (lone surrogate at index ")


def test_validate_text_accepts_a_proper_pair() -> None:
    assert validate_text("\U0001f600") == "\U0001f600"


# ---------------------------------------------------------------- workspace and agent keys


@pytest.mark.parametrize("cwd", [None, "", 5, ["/a"]])
def test_workspace_key_of_non_string_or_empty(cwd: Any) -> None:
    assert workspace_key_of(cwd) == ""
    assert workspace_key_of(cwd, windows=True) == ""


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/work/proj", "/work/proj"),
        ("/work/proj/", "/work/proj"),
        ("/work/proj///", "/work/proj"),
        ("/work/./proj/../api", "/work/api"),
        ("/..", "/"),
        ("/", "/"),
        ("//a", "/a"),
        ("///a//b", "/a/b"),
        ("/Work/Proj", "/Work/Proj"),  # no case folding on POSIX
    ],
)
def test_workspace_key_of_absolute_posix(cwd: str, expected: str) -> None:
    assert workspace_key_of(cwd, windows=False) == expected


def test_workspace_key_of_relative_resolves_against_process_cwd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = os.getcwd()
    assert workspace_key_of("proj", windows=False) == f"{here}/proj"
    assert workspace_key_of(".", windows=False) == here
    assert workspace_key_of("a/../b/", windows=False) == f"{here}/b"


def test_windows_drive_path_is_relative_on_posix(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert workspace_key_of("C:\\work\\proj", windows=False) == f"{os.getcwd()}/C:\\work\\proj"


def test_workspace_key_of_does_not_resolve_symlinks(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert workspace_key_of(str(link), windows=False) == str(link)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("C:\\Work\\Proj", "c:\\work\\proj"),
        ("c:\\work\\proj", "c:\\work\\proj"),
        ("C:\\Work\\Proj\\", "c:\\work\\proj"),
        ("C:/Work/Proj", "c:\\work\\proj"),
        ("C:\\Work\\.\\x\\..\\Proj", "c:\\work\\proj"),
    ],
)
def test_workspace_key_of_windows_lower_cases_the_whole_path(cwd: str, expected: str) -> None:
    assert workspace_key_of(cwd, windows=True) == expected


def test_windows_case_variants_share_a_key_but_not_on_posix() -> None:
    assert workspace_key_of("C:\\Work\\Proj", windows=True) == \
        workspace_key_of("c:\\work\\proj", windows=True)
    assert workspace_key_of("/Work/Proj", windows=False) != \
        workspace_key_of("/work/proj", windows=False)


@pytest.mark.parametrize(
    ("preset", "windows", "expected"),
    [
        (None, False, ""),
        ("", False, ""),
        (5, False, ""),
        ("coder", False, "coder"),
        ("  coder\n", False, "coder"),
        ("\u3000coder\ufeff", False, "coder"),
        ("   ", False, ""),
        ("\t\u00a0", False, ""),
        ("Coder", False, "Coder"),
        ("Coder", True, "coder"),
        (" Code Reviewer ", True, "code reviewer"),
        ("a\u0085", False, "a\u0085"),
    ],
)
def test_agent_key_of(preset: Any, windows: bool, expected: str) -> None:
    assert agent_key_of(preset, windows=windows) == expected


# ---------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (1700000000123, "2023-11-14T22:13:20.123Z"),
        (1700000000999, "2023-11-14T22:13:20.999Z"),
        (1709164800000, "2024-02-29T00:00:00.000Z"),
        (253402300799999, "9999-12-31T23:59:59.999Z"),
    ],
)
def test_iso_ms_and_back(ms: int, text: str) -> None:
    assert iso_ms(ms) == text
    assert parse_iso_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2023-11-14T22:13:20Z", 1700000000000),
        ("2023-11-14T22:13:20.1Z", 1700000000100),
        ("2023-11-14T22:13:20.123456789Z", 1700000000123),
        ("2023-11-14T23:13:20.123+01:00", 1700000000123),
        ("2023-11-14T21:13:20.123-0100", 1700000000123),
        ("2023-11-14 22:13:20.123z", 1700000000123),
    ],
)
def test_parse_iso_ms_variants(text: str, ms: int) -> None:
    assert parse_iso_ms(text) == ms


@pytest.mark.parametrize(
    "text", ["", "2023-11-14T22:13:20.123", "2023-11-14", "yesterday", "2023-13-01T00:00:00Z",
             "2023-11-14T22:13:20.123ZZ", "1700000000123"],
)
def test_parse_iso_ms_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso_ms(text)


def test_parse_iso_ms_rejects_a_trailing_newline() -> None:
    with pytest.raises(ValueError):
        parse_iso_ms("2023-11-14T22:13:20.123Z\n")


# ---------------------------------------------------------------- protocol entries


def protocol_entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": UUID, "track": "user", "scope": "workspace", "workspaceKey": "/work/proj",
        "agentKey": "", "text": "Prefers tabs", "source": "dsh-memento", "tags": ["pref"],
        "version": 1, "createdAt": 1700000000000, "updatedAt": 1700000000000,
        "lastRecalled": None, "recallCount": 0, "sessionId": "s1",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def test_validate_protocol_entry_accepts_and_copies_the_14_fields() -> None:
    e = protocol_entry(extra="ignored", tags=[" b ", "b", "a"])
    out = validate_protocol_entry(e)
    assert list(out) == ["id", "track", "scope", "workspaceKey", "agentKey", "text", "source",
                         "tags", "version", "createdAt", "updatedAt", "lastRecalled",
                         "recallCount", "sessionId"]
    assert out["tags"] == ["b", "a"]
    assert "extra" not in out
    assert out is not e


@pytest.mark.parametrize(
    "changes",
    [
        {"id": UUID.upper()},  # the regex is case-insensitive
        {"sessionId": None},
        {"lastRecalled": 1700000000001, "recallCount": 3},
        {"tags": _DROP},  # missing tags mean []
        {"updatedAt": 1700000000001},
        {"version": 7},
        {"text": "   "},
    ],
)
def test_validate_protocol_entry_accepts(changes: dict[str, Any]) -> None:
    validate_protocol_entry(protocol_entry(**changes))


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"id": "not-a-uuid"}, "id"),
        ({"id": "0f7c1b1e-4a5b-1c3d-9e8f-001122334455"}, "id"),  # version 1 uuid
        ({"id": _DROP}, "id"),
        ({"track": "team"}, "invalid memory scope"),
        ({"scope": "global"}, "invalid memory scope"),
        ({"workspaceKey": None}, "workspaceKey"),
        ({"agentKey": 1}, "agentKey"),
        ({"text": ""}, "text"),
        ({"source": ""}, "source"),
        ({"version": 0}, "version"),
        ({"version": 1.5}, "version"),
        ({"version": True}, "version"),
        ({"version": "1"}, "version"),
        ({"updatedAt": 1699999999999}, "updatedAt"),
        ({"createdAt": "2023-11-14T22:13:20Z"}, "createdAt"),
        ({"lastRecalled": "x"}, "lastRecalled"),
        ({"recallCount": -1}, "recallCount"),
        ({"sessionId": _DROP}, "sessionId"),
        ({"sessionId": 5}, "sessionId"),
        ({"tags": "pref"}, "tags"),
        ({"tags": ["a\tb"]}, "control characters"),
    ],
)
def test_validate_protocol_entry_rejects(changes: dict[str, Any], needle: str) -> None:
    assert needle in invalid(validate_protocol_entry, protocol_entry(**changes))


def test_validate_protocol_entry_rejects_non_objects() -> None:
    invalid(validate_protocol_entry, [protocol_entry()])
    invalid(validate_protocol_entry, None)


def test_missing_track_prints_undefined() -> None:
    message = invalid(validate_protocol_entry, protocol_entry(track=_DROP))
    assert message == f'invalid memory scope: track=undefined scope="workspace" {SCOPE_HELP}'


def test_id_with_trailing_newline_is_rejected() -> None:
    invalid(validate_protocol_entry, protocol_entry(id=UUID + "\n"))


# ---------------------------------------------------------------- Entry


def make_entry(**changes: Any) -> Entry:
    fields: dict[str, Any] = dict(
        id=UUID, track="user", scope="workspace", workspace_key="/work/proj", agent_key="",
        text="Prefers TABS", source="dsh-memento", tags=("pref",), version=1,
        created_at=1700000000000, updated_at=1700000000000, session_id="s1")
    fields.update(changes)
    return Entry(**fields)


def test_entry_fold_size_and_layer() -> None:
    e = make_entry(text="Ünïcode ABC 你好😀")
    assert e.fold == "Ünïcode abc 你好😀"  # ASCII-only folding
    assert e.size == utf16_len(e.text) == 16
    assert e.layer == ("user", "workspace")


def test_entry_revised_refolds_text() -> None:
    e = make_entry().revised(text="NEW Text", version=2)
    assert e.fold == "new text"
    assert e.version == 2


def test_entry_equality_ignores_fold() -> None:
    assert make_entry() == make_entry(fold="whatever")
    assert hash(make_entry()) == hash(make_entry(fold="whatever"))


def test_entries_differing_in_any_field_are_unequal() -> None:
    base = make_entry()
    for name, value in [("id", UUID.replace("0", "1")), ("track", "agent"),
                        ("scope", "user-global"), ("workspace_key", "/other"),
                        ("agent_key", "coder"), ("text", "Prefers tabs"), ("source", "x"),
                        ("tags", ()), ("version", 2), ("created_at", 1), ("updated_at", 1),
                        ("session_id", None), ("meta", (("x-a", "1"),))]:
        other = base.revised(**{name: value})
        assert other != base and getattr(other, name) == value, name
        assert name in repr(other)
    assert base != (UUID,) and base != base.to_protocol()


def test_an_entry_cannot_be_changed_in_place() -> None:
    e = make_entry()
    with pytest.raises(AttributeError):
        e.text = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del e.text
    with pytest.raises(AttributeError):
        e.extra = 1  # type: ignore[attr-defined]
    assert e.text == "Prefers TABS"


def test_an_entry_survives_copy_and_pickle() -> None:
    e = make_entry(meta=(("x-a", "1"),))
    for other in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert other == e and other.fold == e.fold and other.meta == e.meta


def test_revised_refuses_a_field_entries_do_not_have() -> None:
    with pytest.raises(TypeError, match="'txt'"):
        make_entry().revised(txt="typo")


def test_entry_to_protocol_is_a_valid_protocol_entry() -> None:
    out = make_entry().to_protocol(recall_count=2, last_recalled=1700000000500)
    assert out["recallCount"] == 2 and out["lastRecalled"] == 1700000000500
    assert validate_protocol_entry(out) == out


@pytest.mark.parametrize(
    ("entry_keys", "session", "seen"),
    [
        (("", ""), ("/w", "coder"), True),  # a shared user-global entry
        (("/w", ""), ("/w", "coder"), True),
        (("/w", "coder"), ("/w", "coder"), True),
        (("/w", "reviewer"), ("/w", "coder"), False),
        (("/other", ""), ("/w", "coder"), False),
        (("/other", "reviewer"), (None, None), True),
    ],
)
def test_visible(entry_keys: tuple[str, str], session: tuple[str | None, str | None],
                 seen: bool) -> None:
    wk, ak = entry_keys
    e = make_entry(workspace_key=wk, agent_key=ak)
    if wk == "":
        e = make_entry(scope="user-global", workspace_key="", agent_key=ak)
    assert model.visible(e, *session) is seen
