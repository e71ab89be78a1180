"""One guarded YAML reader (filemem.yamlsafe) behind the entry codec, the shipped adapters and
filemem.yaml: the same hostile front-matter is refused the same way by each, with each one's
own error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml.error import YAMLError

import filemem
from filemem import config, yamlsafe
from filemem.adapters import default_registry
from filemem.files.codec import CodecError, decode
from tests.conftest import ROOT

CLAUDE = "claude-code-memory-md"
UUID = "0f7c1b1e-4a5b-4c3d-9e8f-001122334455"
ENTRY_KEYS = f"""\
id: {UUID}
track: user
scope: user-global
workspaceKey: ""
agentKey: ""
source: claude
tags: [pref]
version: 1
createdAt: 2023-11-14T22:13:20.123Z
updatedAt: 2023-11-14T22:13:20.123Z
sessionId: null
"""
DEPTH = 800


def claude_file(extra: str) -> str:
    """A Claude Code auto-memory file whose front-matter carries ``extra`` lines."""
    return ("---\nname: deep\ndescription: a memory with a hostile front-matter\nmetadata:\n"
            f"  type: user\n{extra}---\nThe body.\n")


def import_directory(text: str) -> list[dict[str, Any]]:
    """Import an auto-memory directory holding ``MEMORY.md`` and ``deep.md``."""
    files = {"MEMORY.md": "- [Deep](deep.md) — a deep one\n", "deep.md": text}
    return default_registry().adapt(
        CLAUDE, {"files": files, "path": "/home/me/.claude/projects/-home-me-api/memory"})


def adapter_refusal(extra: str) -> filemem.ProtocolError:
    with pytest.raises(filemem.ProtocolError) as info:
        import_directory(claude_file(extra))
    err = info.value
    assert err.code == "ADAPTER_PAYLOAD"
    assert err.details["adapterId"] == CLAUDE and err.details["file"] == "deep.md"
    assert err.message.startswith(f'adapter "{CLAUDE}": deep.md line ')
    return err


def codec_refusal(extra: str) -> str:
    with pytest.raises(CodecError) as info:
        decode(f"---\n{ENTRY_KEYS}{extra}---\nThe body.\n".encode())
    return str(info.value)


# ---------------------------------------------------------------- deep nesting

DEEP: dict[str, str] = {
    "flow sequences": "deep: " + "[" * DEPTH + "]" * DEPTH + "\n",
    "flow mappings": "deep: " + "{a: " * DEPTH + "1" + "}" * DEPTH + "\n",
    "one per line": "deep:\n" + "  [\n" * DEPTH + "  1" + "]" * DEPTH + "\n",
    "compact block sequences": "deep:\n" + "- " * DEPTH + "x\n",
    "block mappings": "deep:\n" + "".join(" " * i + "k:\n" for i in range(1, 300)) + " " * 300
                      + "v\n",
    # apostrophes inside plain scalars must not hide the brackets after them
    "apostrophes in plain scalars": "deep: " + "[x', " * DEPTH + "1" + "]" * DEPTH + "\n",
    "apostrophe pairs": "deep: [x', " + "[x, " * (DEPTH - 2) + "[x', 1" + "]" * DEPTH + "\n",
    "a quoted string across lines": "deep: ['x\n', " + "[" * DEPTH + "]" * DEPTH + "]\n",
    "closers in a comment first": "# " + "]" * DEPTH + "\ndeep: " + "[" * DEPTH + "]" * DEPTH
                                  + "\n",
}


@pytest.mark.parametrize("extra", DEEP.values(), ids=DEEP.keys())
def test_a_deeply_nested_front_matter_value_is_refused_by_the_claude_import(extra: str) -> None:
    err = adapter_refusal(extra)
    assert "the front-matter is nested too deeply (more than 32 levels)" in err.message
    assert "flatten the value" in err.message
    assert err.details["line"] >= 2


@pytest.mark.parametrize("extra", DEEP.values(), ids=DEEP.keys())
def test_a_deeply_nested_front_matter_value_is_refused_by_the_codec(extra: str) -> None:
    assert "front-matter is nested too deeply" in codec_refusal(extra)


def test_nesting_up_to_the_limit_and_brackets_in_quotes_are_read() -> None:
    nested = "[" * yamlsafe.MAX_DEPTH + "1" + "]" * yamlsafe.MAX_DEPTH
    # the front-matter mapping itself is one level: the value may nest 31 more
    ok = "[" * (yamlsafe.MAX_DEPTH - 1) + "1" + "]" * (yamlsafe.MAX_DEPTH - 1)
    extra = (f"deep: {ok}\nquoted: \"{'[' * 100}\"\nsingle: '{'{' * 100}'\n"
             f"prose: don't [worry]\n# {'[' * 100}\n")
    (memory,) = [e for e in import_directory(claude_file(extra)) if e["track"] == "user"]
    assert memory["text"].startswith("a memory with a hostile front-matter")
    assert decode(f"---\n{ENTRY_KEYS}{extra}---\nx".encode()).extras == (
        "deep", "quoted", "single", "prose")
    assert "nested too deeply" in codec_refusal(f"deep: {nested}\n")


# ---------------------------------------------------------------- the other guards

# (name, front-matter lines, what the message says); the codec and the adapter agree
GUARDS: list[tuple[str, str, str]] = [
    ("alias", "base: &a [1]\nother: *a\n", "uses YAML anchors or aliases"),
    ("anchor only", "base: &a [1]\n", "uses YAML anchors or aliases"),
    ("alias bomb", "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "uses YAML anchors or aliases"),
    ("python tag", "other: !!python/object/apply:os.system [ls]\n", "uses the YAML tag"),
    ("core tag", "other: !!str 12\n", "uses the YAML tag tag:yaml.org,2002:str"),
    ("set tag", "other: !!set {a, b}\n", "uses the YAML tag"),
    ("local tag", "other: !mine x\n", "uses the YAML tag !mine"),
    ("merge key", "base: {x: 1}\nother:\n  <<: {y: 2}\n", "merge key (<<)"),
    ("duplicate key", "other: 1\nother: 2\n", "duplicate key"),
    ("too big", "# " + "x" * 70_000 + "\n", "larger than 65536 bytes"),
    ("too big in UTF-8", "other: " + "ü" * 40_000 + "\n", "larger than 65536 bytes"),
]


@pytest.mark.parametrize(("extra", "needle"), [(e, n) for _, e, n in GUARDS],
                         ids=[name for name, _, _ in GUARDS])
def test_the_claude_import_refuses_what_the_codec_refuses(extra: str, needle: str) -> None:
    err = adapter_refusal(extra)
    assert f"deep.md line {err.details['line']}: the front-matter " in err.message
    assert needle in err.message
    assert needle in codec_refusal(extra)


def test_a_refusal_names_the_line_in_the_file() -> None:
    err = adapter_refusal("other: !mine x\n")
    assert err.details["line"] == 6  # after ---, name, description, metadata, type
    assert "deep.md line 6: the front-matter uses the YAML tag !mine, which is not allowed" \
        in err.message


def test_a_single_memory_file_goes_through_the_same_guard() -> None:
    with pytest.raises(filemem.ProtocolError) as info:
        default_registry().adapt(CLAUDE, {"text": claude_file("other: *a\n"), "file": "deep.md"})
    assert info.value.code == "ADAPTER_PAYLOAD" and "aliases" in info.value.message


# ---------------------------------------------------------------- filemem.yaml


def test_filemem_yaml_goes_through_the_guard_and_stays_a_yaml_error() -> None:
    template = (ROOT / "store-template" / "filemem.yaml").read_bytes()
    assert config.parse(config.load_yaml(template)).write_policy == "ask"
    for bad, needle in [
        (b"schema: 1\nbudgets: " + b"[" * DEPTH + b"]" * DEPTH + b"\n", "nested too deeply"),
        (b"schema: &s 1\nx: *s\n", "anchors or aliases"),
        (b"schema: !!int 1\n", "tag"),
    ]:
        with pytest.raises(YAMLError, match=needle) as info:
            config.load_yaml(bad)
        assert str(info.value).startswith("filemem.yaml ")


# ---------------------------------------------------------------- the reader itself


def test_load_reads_plain_data_and_round_trip_types() -> None:
    text = "a: 1\nb: [x, 'y']\nc: {d: null}\n"
    assert yamlsafe.load(text, what="t") == {"a": 1, "b": ["x", "y"], "c": {"d": None}}
    rt = yamlsafe.load("# kept\n" + text, what="t", typ="rt")
    assert type(rt).__name__ == "CommentedMap" and rt["b"] == ["x", "y"]


@pytest.mark.parametrize("text", ["a: [unclosed\n", "a: b\x01\n", "a: 1\n a: 2\n", "a: 'open\n",
                                  "- &x a\n", "a: *nowhere\n", "---\na: 1\n---\nb: 2\n"])
def test_load_raises_only_its_own_error(text: str) -> None:
    with pytest.raises(yamlsafe.YamlError) as info:
        yamlsafe.load(text, what="the test document")
    assert info.value.message.startswith("the test document ")
    assert info.value.line is None or info.value.line >= 1


def test_size_cap_is_the_callers_choice() -> None:
    text = "a: " + "x" * 100 + "\n"
    assert yamlsafe.load(text, what="t", max_bytes=200) == {"a": "x" * 100}
    with pytest.raises(yamlsafe.YamlError, match="larger than 50 bytes"):
        yamlsafe.load(text, what="t", max_bytes=50)


# ---------------------------------------------------------------- the ruamel-free fast path

_KEYS = ["a", "writePolicy", "agent/workspace", "source:claude", "a.b-c_d", "_x", "true",
         "No", "null", "y", "1", "a::b", "x y", "<<", "~", "a#b", "key"]
_VALUES = ["", "1", "0", "2000", "012", "-1", "+1", "1e3", "0x1f", "1_000", "ask", "auto",
           "off", "Yes", "NULL", "~", "nan", ".inf", "en", "a.b/c-d", "{}", "{ }", "[]",
           "[a]", '"q"', "'q'", "a: b", "a #c", "a#b", "x y", "2001-12-14", "&a x", "*a",
           "!!str x", "|", ">", "{a: 1}", "a,b", "@x", "`x`", "%x", "é", "\t1"]
_GAPS = [": ", ":", ":  ", " : ", ":\t"]
_INDENTS = ["", "  ", "    ", " ", "   ", "\t"]
_TAILS = ["", "  ", " # a comment", "# not one", "\t# tab", " #", "\r"]


_SIMPLE_KEYS = st.sampled_from(_KEYS[:6])
_SIMPLE_VALUES = st.one_of(st.integers(0, 10**12), st.sampled_from(["ask", "auto", "en",
                                                                     "a.b/c-d", "zh"]))
_TREES = st.recursive(_SIMPLE_VALUES, lambda inner: st.dictionaries(_SIMPLE_KEYS, inner,
                                                                     max_size=4), max_leaves=12)


def _render(tree: dict[str, Any], indent: str, step: str) -> list[str]:
    lines = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            lines += [f"{indent}{key}:", *_render(value, indent + step, step)]
        else:
            lines.append(f"{indent}{key}: {'{}' if value == {} else value}")
    return lines


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, dict[str, Any] | None]:
    """A well-formed simple document and its value, or one with a few lines made odd
    (a tricky key, value, gap, indent or tail; then the value is None: unknown)."""
    tree = draw(st.dictionaries(_SIMPLE_KEYS, _TREES, min_size=1, max_size=5))
    lines = _render(tree, "", draw(st.sampled_from(["  ", "    ", " "])))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.sampled_from(["", "# comment", "  # indented", "   "])))
    changed = False
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(lines) - 1))
        indent, rest = lines[at][: len(lines[at]) - len(lines[at].lstrip(" "))], \
            lines[at].lstrip(" ")
        key, _, value = rest.partition(":")
        part = draw(st.integers(0, 5))
        if part == 0:
            key = draw(st.sampled_from(_KEYS))
        elif part == 1:
            value = " " + draw(st.sampled_from(_VALUES))
        elif part == 2:
            value = draw(st.sampled_from(_GAPS)).removeprefix(":") + value.lstrip(" ")
        elif part == 3:
            indent = draw(st.sampled_from(_INDENTS))
        elif part == 4:
            value += draw(st.sampled_from(_TAILS))
        else:
            lines.insert(at, draw(st.sampled_from(["---", "...", "- item", "a: [", "}"])))
        if part != 5:
            lines[at] = f"{indent}{key}:{value}"
        changed = True
    text = "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))
    return text, None if changed else tree


def _ruamel(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.allow_duplicate_keys = False
    return yaml.load(text)


@settings(max_examples=500, deadline=None)
@given(_documents())
def test_the_fast_path_answers_only_what_ruamel_answers(
        doc: tuple[str, dict[str, Any] | None]) -> None:
    text, tree = doc
    fast = yamlsafe.simple_mapping(text)
    if tree is not None:  # well-formed and simple: the fast path reads it
        assert fast == tree
    if fast is not None:
        assert _ruamel(text) == fast


def test_the_fast_path_reads_the_store_template() -> None:
    text = (ROOT / "store-template" / "filemem.yaml").read_text(encoding="utf-8")
    fast = yamlsafe.simple_mapping(text)
    assert fast is not None and fast == _ruamel(text)
    assert fast["budgets"]["agent"]["workspace"] == 4000
    policies = text.replace("writePolicies: {}", "writePolicies:\n  agent/workspace: auto\n"
                            "  source:claude: ask  # a comment")
    assert yamlsafe.simple_mapping(policies) == {
        **fast, "writePolicies": {"agent/workspace": "auto", "source:claude": "ask"}}
    for unsure in ("language: yes", "writePolicy: 'ask'", "maxEntriesPerQuery: 020",
                   "maxEntriesPerQuery:", "language: en\nlanguage: zh", "\tschema: 1",
                   "schema: 1 # c\n  budgets: {}", "budgets: [1]"):
        assert yamlsafe.simple_mapping(unsure) is None, unsure


def test_a_cold_read_of_filemem_yaml_does_not_import_ruamel(tmp_path: Any) -> None:
    import subprocess
    import sys

    filemem.init_store(tmp_path / "s").close()
    code = ("import sys, filemem\n"
            f"filemem.open_store({str(tmp_path / 's')!r}).budgets()\n"
            "print('ruamel' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
