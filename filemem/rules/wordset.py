"""Which of a fixed set of words a text contains, found in one pass instead of one test each.

The checks try a rule only when its trigger words are in the text (:data:`filemem.rules.
injection.TRIGGERS`, :data:`filemem.rules.secrets.TRIGGERS`). Every word goes into one
regular expression shaped as a trie (``g(?:h(?:/hosts)?|ithub_pat_|l)``), so each search
stops at the next place where some word starts and takes the longest word starting there.
The words found are those longest words and every word that is a prefix of one (they start
at the same place), which is exactly the set of words that occur: searching again from the
next character after each hit finds words that overlap an earlier one.

Measured on the ~130 trigger words: the expression takes ~1.5 µs a text where testing each
word (``word in text``) takes ~7 µs, both plus about the same per character, but compiling
it takes ~5 ms. So a process tests its first texts word by word (:data:`COMPILE_AFTER`) and
compiles the expression only if it goes on checking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, TypeAlias

_Trie: TypeAlias = dict[str, "_Trie"]  # a character -> the words going on with it; "" ends one


def _trie_pattern(words: Iterable[str]) -> str:
    trie: _Trie = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: _Trie) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        # greedy: the longer word is tried first, the word ending here if that fails
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


COMPILE_AFTER: Final = 1024  # texts tested word by word before the expression is compiled


class WordSet:
    """A fixed set of words (none empty). The first ``compile_after`` texts are tested word
    by word (a cold ``filemem add`` checks one text, a cold snapshot of 1,000 entries about
    that many); the expression is compiled for the texts after them."""

    __slots__ = ("_left", "_listed", "_pattern", "_prefixes", "words")

    def __init__(self, words: Iterable[str], compile_after: int = COMPILE_AFTER) -> None:
        self.words = frozenset(words)
        if "" in self.words:
            raise ValueError("a WordSet's words must not be empty")
        self._listed = sorted(self.words)
        self._left = compile_after
        self._pattern: re.Pattern[str] | None = None
        self._prefixes: dict[str, frozenset[str]] = {}

    def _compiled(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._prefixes = {w: frozenset(p for p in self.words if w.startswith(p))
                              for w in self.words}
            self._pattern = re.compile(_trie_pattern(self.words))
        return self._pattern

    def found_in(self, text: str) -> frozenset[str]:
        """The words that occur in ``text`` (as substrings, case as given)."""
        if self._pattern is None and self._left > 0:
            self._left -= 1  # a race between threads only compiles a little later
            return frozenset([w for w in self._listed if w in text])
        search, prefixes = self._compiled().search, self._prefixes
        m = search(text)
        if m is None:
            return frozenset()
        found: set[str] = set()
        while m is not None:
            found |= prefixes[m.group()]
            m = search(text, m.start() + 1)
        return frozenset(found)

    def at_once(self, count: int) -> bool:
        """Whether ``count`` more texts would be searched with the expression (compiled, or
        due before they are done): then one search over all of them (:meth:`first_at`)
        compiles nothing that testing them one by one would not. A cold process does not
        compile it for fewer: ~20 M instructions, where a batch searched at once saves
        ~26 K a text (callgrind: a cold check of 100 texts took 24 M more that way)."""
        return self._pattern is not None or count >= self._left

    def first_at(self, text: str, pos: int = 0) -> int:
        """Where the first word that occurs in ``text`` at or after ``pos`` starts (-1: none
        does); with the expression, whatever the texts tested before (one text standing for
        many, as :func:`filemem.rules.findings.scan_all` joins a batch's)."""
        m = self._compiled().search(text, pos)
        return -1 if m is None else m.start()
