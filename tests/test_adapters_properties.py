"""Hypothesis properties of the shipped adapters: export then import gives back the same
entries (up to what each format documents it cannot carry), a Hermes file goes through
import and export byte for byte, and no Markdown input makes the readers crash."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import filemem
from filemem.adapters import default_registry, shipped_module
from filemem.jsstr import utf16_len

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
DELIM = "\n\u00a7\n"

# texts people keep in memory: words, CJK, emoji, Markdown punctuation, line breaks, §
ALPHABET = st.sampled_from([
    *"abcxyzABZ0189 .,:;!?-*#|`~_()[]{}<>\"'/\\@&%§\n\t",
    "中", "文", "记", "忆", "。", "：", "🙂", "🚀", "é", "\u00a0", "\u3000", "\r\n", "\r", "---",
    "```", "## ", "- ", "> ", "§"])
TEXT = st.lists(ALPHABET, min_size=1, max_size=40).map("".join)
TAG_WORD = st.text(alphabet="abcdefgh-_中文🙂", min_size=1, max_size=12)
TYPES = st.sampled_from(["user", "feedback", "project", "reference"])


def _shipped() -> Any:
    return shipped_module()


def entries_strategy(tags: st.SearchStrategy[list[str]], scopes: tuple[str, ...]
                     ) -> st.SearchStrategy[list[dict[str, Any]]]:
    one = st.fixed_dictionaries({
        "track": st.sampled_from(["user", "agent"]),
        "scope": st.sampled_from(scopes),
        "text": TEXT,
        "tags": tags,
        "createdAt": st.integers(0, 2**41),
        "updatedAt": st.integers(0, 2**41),
    })
    return st.lists(one, min_size=1, max_size=8)


def roundtrip(aid: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    registry = default_registry()
    return registry.adapt(aid, registry.export(aid, entries))


def project(entries: list[dict[str, Any]], *keys: str) -> list[tuple[Any, ...]]:
    return [tuple(e.get(k) for k in keys) for e in entries]


# ---------------------------------------------------------------- Hermes


def hermes_text(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def hermes_exportable(text: str) -> bool:
    lines = hermes_text(text).split("\n")
    return bool(hermes_text(text)) and not (len(lines) > 1 and "\u00a7" in lines)


@SETTINGS
@given(entries_strategy(st.lists(TAG_WORD, max_size=3), ("user-global", "workspace")))
def test_hermes_export_then_import(entries: list[dict[str, Any]]) -> None:
    assume(all(hermes_exportable(e["text"]) for e in entries))
    expected: dict[str, list[str]] = {"agent": [], "user": []}
    for e in entries:
        text = hermes_text(e["text"])
        if text not in expected[e["track"]]:
            expected[e["track"]].append(text)
    looks = _shipped().hermes.looks_structured
    assume(all(len(v) != 1 or not looks(v[0]) for v in expected.values()))
    back = roundtrip("hermes-memory-md", entries)
    assert project(back, "track", "scope", "text", "tags") == \
        [(t, "user-global", text, []) for t in ("agent", "user") for text in expected[t]]


@SETTINGS
@given(st.lists(TEXT, min_size=1, max_size=10), st.booleans())
def test_hermes_file_import_then_export_is_byte_identical(texts: list[str], user: bool
                                                          ) -> None:
    """Any file Hermes itself could have written comes back unchanged."""
    items: list[str] = []
    for t in texts:
        t = hermes_text(t)
        if t and t not in items and hermes_exportable(t):
            items.append(t)
    assume(items)
    assume(len(items) > 1 or not _shipped().hermes.looks_structured(items[0]))
    name = "USER.md" if user else "MEMORY.md"
    content = DELIM.join(items)
    assume(len(content) <= (1375 if user else 2200))
    registry = default_registry()
    entries = registry.adapt("hermes-memory-md", {"files": {name: content}})
    assert [e["text"] for e in entries] == items
    assert registry.export("hermes-memory-md", entries) == {"files": {name: content}}


# ---------------------------------------------------------------- Claude Code


def claude_text(text: str) -> str:
    return re.sub(r"\r+\n", "\n", text).strip()


CLAUDE_TAGS = st.tuples(st.lists(TAG_WORD, max_size=3),
                        st.one_of(st.none(), TYPES)).map(
    lambda p: p[0] + ([f"type:{p[1]}"] if p[1] else []))


@SETTINGS
@given(entries_strategy(CLAUDE_TAGS, ("user-global",)))
def test_claude_export_then_import(entries: list[dict[str, Any]]) -> None:
    assume(all(claude_text(e["text"]) for e in entries))
    for e in entries:  # what import does to tags: trimmed, repeats dropped
        e["tags"] = list(dict.fromkeys(t.strip() for t in e["tags"]))
    back = roundtrip("claude-code-memory-md", entries)
    assert project(back, "track", "scope", "tags", "text") == \
        [(e["track"], "user-global", e["tags"], claude_text(e["text"])) for e in entries]


# ---------------------------------------------------------------- mem0


MEM0_TAGS = st.lists(st.one_of(TAG_WORD, TAG_WORD.map(lambda w: f"user:{w}"),
                               TAG_WORD.map(lambda w: f"agent:{w}")), max_size=4)


@SETTINGS
@given(entries_strategy(MEM0_TAGS, ("user-global", "workspace")),
       st.sampled_from(["", "/code/api", "C:\\w"]), st.sampled_from(["", "coder"]),
       st.sampled_from(["dsh-memento", "mem0", "claude"]))
def test_mem0_export_then_import(entries: list[dict[str, Any]], workspace: str, agent: str,
                                 source: str) -> None:
    for e in entries:
        e.update(workspaceKey=workspace if e["scope"] == "workspace" else "", agentKey=agent,
                 source=source, tags=list(dict.fromkeys(t.strip() for t in e["tags"])))
    assume(all(all(t for t in e["tags"]) for e in entries))
    back = roundtrip("mem0", entries)
    keys = ("track", "scope", "text", "tags", "source", "workspaceKey", "agentKey")
    assert project(back, *keys) == project(entries, *keys)


# ---------------------------------------------------------------- robustness


MARKDOWN = st.lists(st.sampled_from(
    ["## Section", "### Sub", "# Title", "- bullet", "* star", "1. one", "  - nested",
     "    indented", "```", "```sh", "~~~", "| a | b |", "|---|---|", "---", "prose line",
     "ends with:", "", "", "中文段落", "🙂 emoji", "## " + "x" * 40, "\u00a7", "- "]),
    max_size=25).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(MARKDOWN, st.sampled_from(["hermes-memory-md", "claude-code-memory-md"]))
def test_markdown_readers_never_crash(text: str, aid: str) -> None:
    try:
        entries = default_registry().adapt(aid, {"text": text, "file": "MEMORY.md"
                                                 if aid.startswith("hermes") else "CLAUDE.md"})
    except filemem.ProtocolError as exc:
        assert exc.code == "ADAPTER_PAYLOAD"
        assert isinstance(exc.details.get("line"), int)
        return
    for e in entries:
        assert e["text"] and e["text"] == e["text"].strip()
        assert all(t and utf16_len(t) <= 32 for t in e["tags"])
        # nothing but markup is dropped: every word of every entry is in the input
        for line in e["text"].split("\n"):
            assert line.strip().lstrip("-*+ 0123456789.") in text


@pytest.mark.parametrize("aid", ["hermes-memory-md", "claude-code-memory-md", "mem0"])
def test_empty_export(aid: str) -> None:
    out = default_registry().export(aid, [])
    assert out == ({"results": []} if aid == "mem0" else {"files": {}})
    if aid != "hermes-memory-md":  # Hermes wants at least one of its two files
        assert default_registry().adapt(aid, out) == []
