"""Results remembered by the text they were computed from, up to a total size in characters.

The checks give the same answer for the same text, and a snapshot (or an MCP resource read)
checks every entry each time it is rendered; remembering the answers makes a render after
the first one cost a look-up per entry. The bound is in characters, not entries, so a store
of long texts holds no more memory than one of short texts; the oldest texts go first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final, Generic, TypeVar, cast

T = TypeVar("T")
_MISSING: Final = object()


class TextMemo(Generic[T]):
    """``fn(text)``, remembered for the texts seen last (at most ``max_chars`` of them) whose
    value ``keep`` accepts (the checks keep only clean texts: a refused secret does not stay
    in memory)."""

    def __init__(self, fn: Callable[[str], T], max_chars: int,
                 keep: Callable[[T], bool] = lambda _value: True) -> None:
        self._fn = fn
        self._max = max_chars
        self._keep = keep
        self._got: dict[str, T] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> T:
        got = self._got.get(text, _MISSING)  # not a KeyError: a seed's texts are all new
        if got is not _MISSING:
            return cast(T, got)
        value = self._fn(text)
        self.remember((text,), value)
        return value

    def remember(self, texts: Iterable[str], value: T) -> None:
        """Remember ``value`` as ``fn``'s for each of ``texts`` (those ``keep`` accepts, none
        longer than the bound), the oldest dropped past it: what a call does after computing
        it, and what a batch found clean in one pass is given
        (:func:`filemem.rules.findings.scan_all`)."""
        if not self._keep(value):
            return
        with self._lock:
            for text in texts:
                if len(text) <= self._max and text not in self._got:
                    self._got[text] = value
                    self._chars += len(text)
            while self._chars > self._max:
                oldest = next(iter(self._got))  # dicts keep insertion order
                del self._got[oldest]
                self._chars -= len(oldest)

    def __len__(self) -> int:
        return len(self._got)

    def clear(self) -> None:
        with self._lock:
            self._got.clear()
            self._chars = 0
