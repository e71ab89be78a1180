"""Which of a fixed set of words a text contains, found in one pass instead of one test each.

The checks try a rule only when its trigger words are in the text (:data:`filemem.rules.
injection.TRIGGERS`, :data:`filemem.rules.secrets.TRIGGERS`). Testing ~100 words one by one
costs more than the rules themselves on an ordinary note; here every word goes into one
regular expression shaped as a trie (``g(?:h(?:/hosts)?|ithub_pat_|l)``), so each search
stops at the next place where some word starts and takes the longest word starting there.
The words found are those longest words and every word that is a prefix of one (they start
at the same place), which is exactly the set of words that occur: searching again from the
next character after each hit finds words that overlap an earlier one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeAlias

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


class WordSet:
    """A fixed set of words (none empty), compiled on first use."""

    __slots__ = ("_pattern", "_prefixes", "words")

    def __init__(self, words: Iterable[str]) -> None:
        self.words = frozenset(words)
        if "" in self.words:
            raise ValueError("a WordSet's words must not be empty")
        self._pattern: re.Pattern[str] | None = None
        self._prefixes: dict[str, frozenset[str]] = {}

    def found_in(self, text: str) -> frozenset[str]:
        """The words that occur in ``text`` (as substrings, case as given)."""
        if self._pattern is None:
            self._pattern = re.compile(_trie_pattern(self.words))
            self._prefixes = {w: frozenset(p for p in self.words if w.startswith(p))
                              for w in self.words}
        search, prefixes = self._pattern.search, self._prefixes
        m = search(text)
        if m is None:
            return frozenset()
        found: set[str] = set()
        while m is not None:
            found |= prefixes[m.group()]
            m = search(text, m.start() + 1)
        return frozenset(found)
