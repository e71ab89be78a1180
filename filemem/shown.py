"""Stored or agent-supplied text as a person is shown it: the one renderer every surface uses.

A text from an agent (or from a synced store) must not be able to talk to the terminal or to
dress up as the frame around it. Two forms:

* :func:`visible` for a one-line field: every control character is written as a visible
  escape (``\\x1b``, ``\\r``, ``\\n``, ``\\t``, ``\\x9b``, ``\\u2028``...): all of C0, DEL,
  C1, the line and paragraph separators, the bidirectional controls and lone surrogates.
  Everything else (letters of any script, emoji with their joiners, a backslash) is shown as
  it is, so plain text looks the same as ever; the escape is for what would otherwise be
  invisible or act on the screen.
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

import json
import re
import unicodedata
from typing import Any, Final

BAR: Final = "\u2502"  # │ : starts every line of the text
MORE: Final = "\u2502\u21aa"  # │↪ : the same line of the text, continued
BEGIN: Final = "\u250c\u2500 text"  # ┌─ text
END: Final = "\u2514\u2500 end of text"  # └─ end of text
WIDTH: Final = 76  # columns of text on one shown line

_JSON_RAW: Final = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                              "\u2028\u2029\ud800-\udfff]")
_NAMED: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# what would act on the screen or be invisible where it matters: C0, DEL, C1, the
# bidirectional controls, the line and paragraph separators, lone surrogates
_HIDDEN: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                            "\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` on one line, every control character written as a visible escape (with
    ``keep_newlines``, newlines stay line breaks: for text that is not the agent's alone,
    such as an error message or a diff)."""
    if keep_newlines:
        return "\n".join(visible(line) for line in text.split("\n"))
    return _HIDDEN.sub(_escape, text)


def _columns(ch: str) -> int:
    if unicodedata.combining(ch) or ch == "\u200d":
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
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
