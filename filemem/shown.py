"""Stored or agent-supplied text as a person is shown it: the one renderer every surface uses.

A text from an agent (or from a synced store) must not be able to talk to the terminal or to
dress up as the frame around it. Two forms:

* :func:`visible` for a one-line field: every character that is invisible or acts on the
  screen is written as a visible escape (``\\x1b``, ``\\r``, ``\\n``, ``\\t``, ``\\x9b``,
  ``\\u2028``, ``\\u202e``, ``\\u200b``, ``\\U000e0041``...): all of C0, DEL, C1, the line
  and paragraph separators, the bidirectional controls, zero-width characters and joiners,
  U+2060 and U+FEFF, every other format (Cf) character, tag characters, runs of variation
  selectors, blank filler letters and lone surrogates (:func:`kind_at` says which).
  Everything else (letters of any script, emoji with their joiners, a flag, a backslash) is
  shown as it is, so plain text looks the same as ever. :func:`warning` is the one line that
  says what the escapes of a text are.
* :func:`block` for a framed multi-line text: the same escapes, but newlines stay line
  breaks; every line of the text starts with :data:`BAR` (``│``), between a :data:`BEGIN`
  line and an :data:`END` line that start with a corner instead. No line of the text can
  look like a frame line, since a text line always carries the bar. A line wider than
  :data:`WIDTH` columns goes on in further lines starting with :data:`MORE` (``│↪``), so a
  window's own wrapping cannot start a visual line with the agent's words.

The JSON outputs keep the text exact: :func:`json_text` is ``json.dumps`` (which escapes C0
itself) that also writes DEL, C1 and the other characters above as ``\\uXXXX`` escapes, so
the JSON parses to the very same text and still puts no raw control on a terminal.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from typing import Any, Final

BAR: Final = "\u2502"  # │ : starts every line of the text
MORE: Final = "\u2502\u21aa"  # │↪ : the same line of the text, continued
BEGIN: Final = "\u250c\u2500 text"  # ┌─ text
END: Final = "\u2514\u2500 end of text"  # └─ end of text
WIDTH: Final = 76  # columns of text on one shown line

_BIDI: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                         "\u2066\u2067\u2068\u2069")
_ZERO_WIDTH: Final = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_FILLERS: Final = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: blank letters
_NAMED: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# What each class of hidden character is, for the warning line (and the findings' rules).
KINDS: Final = {
    "control-character": "control character",
    "line-separator": "line or paragraph separator",
    "bidi-control": "bidirectional control (can reorder what is shown)",
    "zero-width": "zero-width or joiner character",
    "tag-character": "tag character (invisible ASCII look-alike)",
    "format-character": "other invisible format character",
    "variation-selector-run": "run of variation selectors (can carry hidden data)",
    "invisible-filler": "blank filler letter",
    "lone-surrogate": "lone surrogate",
}
# Every character :func:`kind_at` may call hidden, and a few more (the format characters of
# newer Unicode versions): a text this finds nothing in is shown as it is, at no cost.
@functools.cache
def _maybe() -> re.Pattern[str]:
    # compiled on first use, by a text that is not all ASCII: compiling this class costs a
    # cold command 2-5 ms, and most notes never need it
    return re.compile(
        "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
        "\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u206f\u3164"
        "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\ud800-\udfff\U000110bd\U000110cd"
        "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
        "\U000e0100-\U000e01ef]")


_MAYBE_ASCII: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # _maybe()'s ASCII part


def plain(text: str) -> bool:
    """Can ``text`` hold no hidden character at all (tab and newline aside)? A fast check:
    False means :func:`kind_at` has to look."""
    return first_unplain(text) < 0


def first_unplain(text: str, pos: int = 0) -> int:
    """Where the first character at or after ``pos`` that keeps ``text`` from being
    :func:`plain` is (-1: none is)."""
    # most notes are ASCII: a small class is quicker to test than _maybe()'s
    m = (_MAYBE_ASCII if text.isascii() else _maybe()).search(text, pos)
    return -1 if m is None else m.start()


# Scripts whose words use ZWNJ/ZWJ as spelling (Arabic script for Persian and Urdu, the Indic
# scripts, Sinhala, Myanmar): a joiner between two of their letters is ordinary text.
_JOINING_SCRIPTS: Final = ((0x0600, 0x08FF), (0x0900, 0x0DFF), (0x1000, 0x109F),
                           (0xA8E0, 0xA8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF))


def _emoji(ch: str) -> bool:
    code = ord(ch)
    return (0x1F000 <= code <= 0x1FAFF or 0x2300 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF
            or 0x1F3FB <= code <= 0x1F3FF or unicodedata.category(ch) == "So")


def _joining_letter(ch: str) -> bool:
    code = ord(ch)
    return unicodedata.category(ch)[0] in "LM" and any(
        lo <= code <= hi for lo, hi in _JOINING_SCRIPTS)


def _is_vs(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _emoji_before(text: str, i: int) -> bool:
    """Is the character before ``i`` (past variation selectors) an emoji?"""
    j = i - 1
    while j >= 0 and _is_vs(text[j]):
        j -= 1
    return j >= 0 and _emoji(text[j])


def _tag_letter(ch: str) -> bool:
    return 0xE0030 <= ord(ch) <= 0xE0039 or 0xE0061 <= ord(ch) <= 0xE007A


def _subdivision_flag(text: str, i: int) -> bool:
    """Is the tag character at ``i`` part of an emoji flag such as England's (U+1F3F4, two to
    seven tag digits or lower-case letters, U+E007F)? Those are the only ordinary use of
    tags. Looks at most eight characters either way, so a long run of tags costs no more."""
    if text[i] == "\U000e007f":
        end = i
    elif _tag_letter(text[i]):
        end = i + 1
        while end < len(text) and end - i <= 8 and _tag_letter(text[end]):
            end += 1
        if end >= len(text) or text[end] != "\U000e007f":
            return False
    else:
        return False
    start = end
    while start > 0 and end - start <= 8 and _tag_letter(text[start - 1]):
        start -= 1
    return 2 <= end - start <= 7 and start > 0 and text[start - 1] == "\U0001f3f4"


def kind_at(text: str, i: int) -> str | None:
    """The class of hidden character at ``text[i]`` (a key of :data:`KINDS`), or None for a
    character a person sees as it is. Tab and newline are ordinary; so are a zero-width
    joiner inside an emoji sequence (a family, a profession), a joiner between two letters of
    a script that spells with joiners, one variation selector (an emoji's text or emoji
    form) and the tags of a subdivision flag."""
    ch = text[i]
    code = ord(ch)
    if ch in "\t\n":
        return None
    if code < 0x20 or 0x7f <= code <= 0x9f:
        return "control-character"
    if code < 0xA0:
        return None
    if code in (0x2028, 0x2029):
        return "line-separator"
    if ch in _BIDI:
        return "bidi-control"
    if 0xD800 <= code <= 0xDFFF:
        return "lone-surrogate"
    if 0xE0000 <= code <= 0xE007F:
        return None if _subdivision_flag(text, i) else "tag-character"
    if ch in _ZERO_WIDTH:
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if ch == "\u200d" and nxt and _emoji_before(text, i) and _emoji(nxt):
            return None
        if ch in "\u200c\u200d" and i > 0 and nxt and _joining_letter(text[i - 1]) \
                and _joining_letter(nxt):
            return None
        return "zero-width"
    if ch in _FILLERS:
        return "invisible-filler"
    if _is_vs(ch):
        run = (i > 0 and _is_vs(text[i - 1])) or (i + 1 < len(text) and _is_vs(text[i + 1]))
        return "variation-selector-run" if run else None
    if unicodedata.category(ch) == "Cf":
        return "format-character"
    return None


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` on one line, every hidden character (:func:`kind_at`, and tab) written as a
    visible escape (with ``keep_newlines``, newlines stay line breaks: for text that is not
    the agent's alone, such as an error message or a diff)."""
    if keep_newlines:
        return "\n".join(visible(line) for line in text.split("\n"))
    if "\t" not in text and "\n" not in text and plain(text):
        return text
    return "".join(_escape(ch) if ch in "\t\n" or kind_at(text, i) else ch
                   for i, ch in enumerate(text))


def hidden(text: str) -> dict[str, int]:
    """How many hidden characters of each class ``text`` holds (tab and newline are not)."""
    counts: dict[str, int] = {}
    if plain(text):
        return counts
    for i in range(len(text)):
        kind = kind_at(text, i)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def warning(text: str, *, several: bool = False) -> str | None:
    """One line saying what the escapes in the shown ``text`` are, or None if it has none
    (``several``: ``text`` is the texts of a listing, joined by newlines)."""
    counts = hidden(text)
    if not counts:
        return None
    n = sum(counts.values())
    parts = "; ".join(f"{c} \u00d7 {KINDS[k]}" for k, c in counts.items())
    holds = "these texts hold" if several else "this text holds"
    return (f"warning: {holds} {n} invisible or control "
            f"{'character' if n == 1 else 'characters'}, shown above as \\x.., \\u.... or "
            f"\\U........ escapes: {parts}. The model would get them as they are.")


def _columns(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) == "Cf" or _is_vs(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _pieces(line: str, width: int) -> list[str]:
    """``line`` (already made visible) cut into pieces of at most ``width`` columns; a
    character of no width stays with the one before it."""
    pieces: list[str] = []
    current, used = "", 0
    for ch in line:
        cols = _columns(ch)
        if cols and used + cols > width and current:
            pieces.append(current)
            current, used = "", 0
        current += ch
        used += cols
    pieces.append(current)
    return pieces


def block(text: str, width: int = WIDTH) -> list[str]:
    """``text`` framed for a person: :data:`BEGIN`, each line of it after :data:`BAR` (an
    empty line is the bar alone; a long one continues after :data:`MORE`), then
    :data:`END`."""
    lines = [BEGIN]
    for raw in text.split("\n"):
        shown = visible(raw)
        if not shown:
            lines.append(BAR)
            continue
        first, *rest = _pieces(shown, width)
        lines.append(f"{BAR} {first}")
        lines += [f"{MORE} {piece}" for piece in rest]
    lines.append(END)
    return lines


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, with every character
    :func:`visible` would escape (and JSON does not) as a ``\\uXXXX`` escape: the same JSON
    value, nothing raw on a screen. These characters only occur inside JSON strings."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if plain(text):
        return text
    return "".join(_json_escape(ch) if ord(ch) >= 0x7f and kind_at(text, i) else ch
                   for i, ch in enumerate(text))


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def them(n: int) -> str:
    """``it`` for one thing, ``them`` for several: the pronoun beside :func:`counted`."""
    return "it" if n == 1 else "them"


def counted(n: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``: a count with its noun (``many``: the plural, if not
    ``one`` + s), so no message says "1 entries"."""
    return f"{n} {one if n == 1 else many or one + 's'}"
