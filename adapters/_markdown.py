"""Free Markdown (CLAUDE.md, a hand-written MEMORY.md) cut into memory entries.

People keep memory as headings with bullets and short paragraphs. Each top-level bullet and
each paragraph becomes one entry; the ``##`` (and deeper) headings above it become its tags.
Nothing a person wrote is dropped except the markup that carries no memory: a ``# Title``
line, horizontal rules, bullet markers and blank lines between entries.

- A bullet keeps its indented continuation lines (nested bullets, indented code) and lines
  that follow it directly (Markdown's lazy continuation), with their line breaks.
- A fenced code block or a table stays whole. It belongs to the entry right above it when
  nothing separates them or when that entry ends with a colon (``Run tests with:``);
  otherwise it is an entry of its own.
- An unclosed code fence is an error at the line that opens it: reading on would swallow
  the rest of the file into one entry.
- A heading that cannot be a tag (over 32 characters, control characters) is an error at
  its line rather than a tag silently cut short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ._common import tag_problem

_HEADING: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\Z")
_CLOSING_HASHES: Final = re.compile(r"(?:^|[ \t]+)#+\Z")
_BULLET: Final = re.compile(r" ?(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?\Z")
_FENCE: Final = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)\Z")
_RULE: Final = re.compile(r" {0,3}([-*_])[ \t]*(?:\1[ \t]*){2,}\Z")
_COLONS: Final = (":", "\uff1a")  # ASCII and full-width (CJK) colon


class MarkdownError(ValueError):
    """A Markdown file that cannot be cut into entries without losing or mangling text."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class Block:
    """One entry's worth of Markdown: its text, the headings above it, its first line."""

    text: str
    tags: list[str]
    line: int


@dataclass
class _Current:
    kind: str  # "bullet" | "para" | "block"
    line: int
    tags: list[str]
    lines: list[str] = field(default_factory=list)
    blanks: int = 0  # blank lines seen since its last line

    def ends_with_colon(self) -> bool:
        last = next((x for x in reversed(self.lines) if x.strip()), "")
        return last.rstrip().endswith(_COLONS)

    def append(self, line: str) -> None:
        self.lines.extend([""] * self.blanks)
        self.blanks = 0
        self.lines.append(line)


def _indented(line: str) -> bool:
    return line.startswith(("  ", "\t"))


def _opens_fence(line: str) -> str | None:
    """The fence (```` ``` ```` or ``~~~``, maybe longer) that ``line`` opens, if any."""
    m = _FENCE.match(line)
    if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
        return None  # ``` followed by more backticks is inline code, not a fence
    return m.group(1)


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def parse(text: str) -> list[Block]:
    """Cut ``text`` into blocks (lines split on LF or CRLF; a lone CR is text)."""
    blocks: list[Block] = []
    sections: list[tuple[int, str]] = []  # (level, title) of the headings in effect
    cur: _Current | None = None
    fence: tuple[str, int] | None = None  # (fence string, line it opened on)

    def tags_now() -> list[str]:
        out: list[str] = []
        for _, title in sections:
            if title and title not in out:
                out.append(title)
        return out

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            body = "\n".join(cur.lines).strip()
            if body:
                blocks.append(Block(body, cur.tags, cur.line))
        cur = None

    def start(kind: str, n: int, line: str) -> None:
        nonlocal cur
        flush()
        cur = _Current(kind, n, tags_now())
        cur.append(line)

    for n, raw in enumerate(re.split(r"\r?\n", text), start=1):
        line = raw
        if fence is not None:
            assert cur is not None
            cur.append(line)
            if _closes(line, fence[0]):
                fence = None
            continue
        if not line.strip():
            if cur is not None:
                cur.blanks += 1
            continue
        opens = _opens_fence(line)
        if cur is not None and cur.kind == "bullet" and _indented(line):
            cur.append(line)  # nested list, continuation, indented code
            if opens:
                fence = (opens, n)
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            level = len(h.group(1))
            title = _CLOSING_HASHES.sub("", h.group(2) or "").strip()
            if level == 1:
                sections = []  # a document title: it names the file, it is not a memory
                continue
            problem = tag_problem(title) if title.strip() else None
            if problem:
                raise MarkdownError(n, f"the heading {title!r} cannot be a tag: {problem}; "
                                       "shorten the heading and import again")
            sections = [s for s in sections if s[0] < level] + [(level, title)]
            continue
        if _RULE.match(line):
            flush()
            continue
        if opens or line.lstrip().startswith("|"):
            if cur is not None and (cur.blanks == 0 or cur.ends_with_colon()):
                cur.append(line)
            else:
                start("block", n, line)
            if opens:
                fence = (opens, n)
            continue
        b = _BULLET.match(line)
        if b:
            start("bullet", n, b.group(1) or "")
            continue
        if cur is not None and cur.blanks == 0:
            cur.append(line)  # paragraph continuation, or a bullet's lazy continuation
        else:
            start("para", n, line)
    if fence is not None:
        raise MarkdownError(fence[1], f"the code fence {fence[0]} opened here is never closed")
    flush()
    return blocks


def looks_structured(text: str) -> bool:
    """Whether ``text`` reads as a Markdown document of memories rather than one note:
    it has a ``##`` (or deeper) heading, or it is nothing but two or more bullets."""
    bullets = 0
    others = 0
    fence: str | None = None
    for line in re.split(r"\r?\n", text):
        if fence is not None:
            if _closes(line, fence):
                fence = None
            continue
        if not line.strip() or _indented(line):
            continue
        opens = _opens_fence(line)
        if opens:
            fence = opens
            others += 1
            continue
        h = _HEADING.match(line)
        if h and len(h.group(1)) >= 2:
            return True
        if _BULLET.match(line) and not _RULE.match(line):
            bullets += 1
        else:
            others += 1
    return bullets >= 2 and others == 0
