"""A text as the checks read it: NFKC-normalised, hidden characters left out, and a map back.

Planted instructions hide behind look-alikes: fullwidth letters (``ｉｇｎｏｒｅ``), ligatures,
a zero-width space or a soft hyphen inside a word (``ign\u200bore``), tag characters. The
checks therefore match a normalised form: every character NFKC-normalised on its own, every
hidden character (:func:`filemem.shown.kind_at`) and every combining mark left out, and the
Cyrillic and Greek letters that look like Latin ones (``\u0456gnore``, ``[f\u0456lemem:``)
read as those (:data:`LOOKALIKES`; a Russian or Greek word does not turn into an English
instruction that way, a disguised English one is unmasked). Each
character of the normalised form remembers which character of the original it came from,
so a finding's span is the original text's.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Final, NamedTuple

from filemem import shown

# Cyrillic and Greek letters drawn like Latin ones (after NFKC), as the Latin letter.
LOOKALIKES: Final = {
    **dict(zip("\u0430\u0441\u0435\u04bb\u0456\u0458\u043e\u0440\u0455\u0443\u0445"
               "\u0501\u051b\u051d\u04cf\u0261", "acehijopsyxdqwlg", strict=True)),
    **dict(zip("\u0410\u0412\u0421\u0415\u041d\u0406\u0408\u041a\u041c\u041e\u0420"
               "\u0405\u0422\u0425\u0423", "ABCEHIJKMOPSTXY", strict=True)),
    **dict(zip("\u03b1\u03bf\u03c1\u03b9\u03ba\u03bd\u03c5\u03c7", "aopikvux", strict=True)),
    **dict(zip("\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1"
               "\u03a4\u03a5\u03a7", "ABEZHIKMNOPTYX", strict=True)),
}


class Normalized(NamedTuple):
    text: str  # the normalised form
    origin: Sequence[int]  # origin[i]: index in the original of text[i]
    original: str

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original's code point span ``[a, b)`` of the normalised ``[start, end)``."""
        if not self.origin:
            return 0, 0
        a = self.origin[min(start, len(self.origin) - 1)]
        b = self.origin[max(min(end, len(self.origin)) - 1, 0)] + 1
        return a, max(a, b)


def is_normal(text: str) -> bool:
    """Whether ``text`` is its own normalised form, known without normalising it: ASCII with
    no hidden character (most notes)."""
    return text.isascii() and shown.plain(text)


def normalize(text: str) -> Normalized:
    if is_normal(text):  # most notes: nothing to normalise
        return Normalized(text, range(len(text)), text)
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if shown.kind_at(text, i) and ch not in "\r\x0b\x0c\x85":
            continue  # invisible: left out, so it cannot split a word (a CR still breaks one)
        piece = unicodedata.normalize("NFKC", ch) if ord(ch) >= 0x80 else ch
        for p in piece:
            if unicodedata.combining(p):
                continue
            out.append(LOOKALIKES.get(p, p))
            origin.append(i)
    return Normalized("".join(out), tuple(origin), text)
