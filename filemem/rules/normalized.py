"""A text as the checks read it: NFKC-normalised, hidden characters left out, and a map back.

Planted instructions hide behind look-alikes: fullwidth letters (``ｉｇｎｏｒｅ``), ligatures,
a zero-width space or a soft hyphen inside a word (``ign\u200bore``), tag characters. The
checks therefore match a normalised form: every character NFKC-normalised on its own, every
hidden character (:func:`filemem.shown.kind_at`) and every combining mark left out. Each
character of the normalised form remembers which character of the original it came from,
so a finding's span is the original text's.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from filemem import shown


@dataclass(frozen=True)
class Normalized:
    text: str  # the normalised form
    origin: tuple[int, ...]  # origin[i]: index in the original of text[i]
    original: str

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original's code point span ``[a, b)`` of the normalised ``[start, end)``."""
        if not self.origin:
            return 0, 0
        a = self.origin[min(start, len(self.origin) - 1)]
        b = self.origin[max(min(end, len(self.origin)) - 1, 0)] + 1
        return a, max(a, b)


def normalize(text: str) -> Normalized:
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if shown.kind_at(text, i) and ch not in "\r\x0b\x0c\x85":
            continue  # invisible: left out, so it cannot split a word (a CR still breaks one)
        piece = unicodedata.normalize("NFKC", ch) if ord(ch) >= 0x80 else ch
        for p in piece:
            if unicodedata.combining(p):
                continue
            out.append(p)
            origin.append(i)
    return Normalized("".join(out), tuple(origin), text)
