"""The history newest first from HEAD, as ``auditList`` reads it, kept from one call to the
next: then a call after a write does not walk a hundred commits again.

A commit made on top of the HEAD last read (one parent: that HEAD) is put in front, which is
exact: the walk from it is that commit, then the walk from its parent. Any other move of HEAD
(a merge, a reset, an amend, a redaction's rewritten history) starts a new walk. What is kept
is named by commit shas, which fix their content, so it cannot go stale. Bounded: the commits
holding the newest ``KEPT_ROWS`` rows (auditList's most).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Final

from filemem.files.gitrepo import CommitInfo, GitRepo
from filemem.store.auditlog import RowBlock

KEPT_ROWS: Final = 10_000


class Walk:
    def __init__(self, git: GitRepo, block: Callable[[CommitInfo], RowBlock]) -> None:
        self.git = git
        self._block = block
        self._lock = threading.Lock()  # the walk goes on through one generator
        self._head: str | None = None
        self._blocks: list[RowBlock] = []  # the commits read so far, in walk order
        self._rows = 0  # the rows they hold
        self._rest: Iterator[CommitInfo] | None = None  # the walk's next commits
        self._cut = False  # older commits were dropped (the bound): a longer read restarts

    def blocks(self, head: str, limit: int) -> list[RowBlock]:
        """The blocks of the first commits of the walk from ``head``, newest first, until
        they hold ``limit`` rows (or the whole history)."""
        with self._lock:
            if head != self._head:
                self._move(head)
            if limit > self._rows and self._cut:
                self._start(head)
            while self._rows < limit and self._rest is not None:
                info = next(self._rest, None)
                if info is None:
                    self._rest = None
                    break
                block = self._block(info)
                self._blocks.append(block)
                self._rows += len(block.rows)
            out: list[RowBlock] = []
            seen = 0
            for block in self._blocks:
                if seen >= limit:
                    break
                out.append(block)
                seen += len(block.rows)
            return out

    def _move(self, head: str) -> None:
        info = self.git.commit(head)
        if self._head is None or info.parents != (self._head,):
            self._start(head)
            return
        block = self._block(info)
        self._head = head
        self._blocks.insert(0, block)
        self._rows += len(block.rows)
        while len(self._blocks) > 1 and self._rows - len(self._blocks[-1].rows) >= KEPT_ROWS:
            self._rows -= len(self._blocks.pop().rows)
            self._rest, self._cut = None, True

    def _start(self, head: str) -> None:
        self._head = head
        self._blocks, self._rows, self._cut = [], 0, False
        self._rest = self.git.newest_first(head)
