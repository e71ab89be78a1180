"""What the Claude Code adapter's import and export share: the auto-memory directory's
names and limits, how a memory's type maps onto a track, and the description and name that
export derives for a memory (and import recognises as derived).

Also the round-trip metadata's helpers: the hash that tells whether a text is still the one
that came in, and where pieces of a file sit in it, so that the parts an import cut a file
into can be put back together exactly.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

from filemem.files.codec import quote

from ._common import tag_problem

ID: Final = "claude-code-memory-md"
INDEX: Final = "MEMORY.md"
INDEX_MAX_LINES: Final = 200
INDEX_MAX_BYTES: Final = 25_000
DESCRIPTION_MAX: Final = 150
TRACK_OF_TYPE: Final = {"user": "user", "feedback": "user", "project": "agent",
                        "reference": "agent"}
DEFAULT_TYPE: Final = {"user": "user", "agent": "project"}
INDEX_LINE: Final = re.compile(
    r"\s{0,3}[-*+]\s+\[(?P<title>[^\]]*)\]\((?P<target>[^)\s]+)\)(?P<rest>.*)\Z")
SAFE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
_YAML_BREAKS: Final = "\u2028\u2029\ufeff\ufffe\uffff"
_YAML_WORDS: Final = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def track_of_type(kind: str) -> str:
    return TRACK_OF_TYPE.get(kind, "user")


def derive_description(text: str) -> str:
    """The description export writes: the first non-blank line, cut at 150 characters (the
    body keeps the whole text, so nothing is lost)."""
    first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return first if len(first) <= DESCRIPTION_MAX else first[:DESCRIPTION_MAX - 1] + "\u2026"


def derive_name(kind: str, description: str) -> str:
    """``<type>-<first words>``, Claude's own naming habit (``feedback-db-tests``)."""
    ascii_text = unicodedata.normalize("NFKD", description).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for w in words[:6]:
        if len(slug) + len(w) + 1 > 48:
            break
        slug = f"{slug}-{w}" if slug else w
    base = re.sub(r"[^a-z0-9-]+", "-", kind.lower()).strip("-") or "memory"
    if slug == base or slug.startswith(base + "-"):
        return slug  # "project-..." needs no second "project-"
    return f"{base}-{slug or 'memory'}"


def yaml_str(value: str) -> str:
    """A YAML scalar for ``value``: plain when that is unambiguous (as Claude Code writes
    them), else double-quoted."""
    if (value and value[0].isalpha() and value == value.strip() and ": " not in value
            and " #" not in value and not value.endswith(":")
            and not any(ch < " " or "\x7f" <= ch <= "\x9f" or ch in _YAML_BREAKS
                        for ch in value)
            and value.lower() not in _YAML_WORDS):
        return value
    return quote(value)


def is_derived_name(name: str, kind: str, text: str) -> bool:
    base = derive_name(kind, derive_description(text))
    return name == base or re.fullmatch(re.escape(base) + r"-\d+", name) is not None


def expected_tags(kind: str, name: str, text: str) -> list[str]:
    """The tags import derives from a memory file's type and name alone."""
    tags = []
    if kind != DEFAULT_TYPE[track_of_type(kind)]:
        tags.append(f"type:{kind}")
    if not is_derived_name(name, kind, text) and tag_problem(f"name:{name}") is None:
        tags.append(f"name:{name}")
    return tags


def newlines(text: str) -> str:
    """CRLF (and CRs before a line end, invisible anyway) to LF, idempotently."""
    return re.sub(r"\r+\n", "\n", text)


# ---------------------------------------------------------------- round-trip helpers


def sha256(text: str) -> str:
    """The hash filemem keeps with an adapter's metadata (SHA-256 of the UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_id(text: str) -> str:
    """A short name for one version of a file, shared by the entries cut from it."""
    return sha256(text)[:16]


def line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def locate(text: str, pieces: list[tuple[int, str]]) -> tuple[list[str], str] | None:
    """Where each piece (the 1-based line it starts on, its exact content), in file order,
    sits in ``text``: the text before each one (after the previous piece) and the text after
    the last, so that ``"".join(before[i] + content[i]) + after == text``; None if a piece
    is not there as it is."""
    starts = line_starts(text)
    before: list[str] = []
    cursor = 0
    for line, content in pieces:
        if not content or not 1 <= line <= len(starts):
            return None
        pos = text.find(content, max(cursor, starts[line - 1]))
        if pos < 0:
            return None
        before.append(text[cursor:pos])
        cursor = pos + len(content)
    return before, text[cursor:]


def whole_lines(before: str) -> str:
    """What to keep of the text before a piece that is gone: its complete lines (headings,
    blank lines), not the start of the piece's own line (a bullet marker)."""
    cut = before.rfind("\n")
    return before[:cut] if cut >= 0 else ""
