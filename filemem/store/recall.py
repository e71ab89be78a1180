"""Recall counters (``recallCount``, ``lastRecalled``): usage statistics, not memory.

They live in ``.filemem/recall.log`` beside the repository, never in entry files, so a query
never dirties the working tree or makes a commit. Each query appends one line
``<ts> <id> <id> ...`` with a single ``O_APPEND`` write (atomic between processes for lines
this short), and every process folds in what others appended since it last looked. When the
log grows large it is folded into ``recall.json`` under the store lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from filemem.files import atomic
from filemem.store.names import linked

if TYPE_CHECKING:
    from filemem.model import Entry
    from filemem.types import ProtocolEntry

LOG_NAME: Final = "recall.log"
BASE_NAME: Final = "recall.json"
COMPACT_AT: Final = 4 * 1024 * 1024


class RecallCounters:
    def __init__(self, meta_dir: str) -> None:
        self.log_path = os.path.join(meta_dir, LOG_NAME)
        self.base_path = os.path.join(meta_dir, BASE_NAME)
        self._counts: dict[str, list[int]] = {}  # id -> [count, last]
        self._offset = 0
        self._log_id: tuple[int, int] | None = None
        self._base_id: tuple[int, int, int, int] | None = None

    def refresh(self) -> None:
        """Fold in what was appended since the last look (a stat when nothing was)."""
        base_id = atomic.identity_at(self.base_path)
        if base_id != self._base_id:
            self._counts = {}
            self._offset = 0
            self._log_id = None
            self._base_id = base_id
            if base_id is not None:
                try:
                    raw = json.loads(self._read(self.base_path))
                    self._counts = {k: [int(v[0]), int(v[1])] for k, v in raw.items()}
                except (OSError, ValueError, TypeError, IndexError):
                    self._counts = {}
        try:
            st = os.stat(self.log_path)
        except FileNotFoundError:
            return
        log_id = (st.st_ino, st.st_dev)
        if log_id != self._log_id:
            self._log_id = log_id
            self._offset = 0
        if st.st_size <= self._offset:
            return
        try:
            with os.fdopen(self._open(self.log_path, os.O_RDONLY), "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:  # folded into the base by another process meanwhile
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        self._fold(data[:end])

    def _fold(self, data: bytes) -> None:
        counts = self._counts
        for line in data.split(b"\n"):
            parts = line.split()
            if len(parts) < 2:
                continue
            try:
                ts = int(parts[0])
            except ValueError:
                continue
            for raw in parts[1:]:
                key = raw.decode("ascii", "replace")
                c = counts.get(key)
                if c is None:
                    counts[key] = [1, ts]
                else:
                    c[0] += 1
                    if ts > c[1]:
                        c[1] = ts

    @staticmethod
    def _open(path: str, flags: int) -> int:
        """Never through a symbolic link: one is refused as STORE_CORRUPT naming it."""
        try:
            return atomic.open_nofollow(path, flags)
        except atomic.LinkRefused:
            raise linked(path) from None

    def _read(self, path: str) -> bytes:
        with os.fdopen(self._open(path, os.O_RDONLY), "rb") as f:
            return f.read()

    def get(self, entry_id: str) -> tuple[int, int | None]:
        c = self._counts.get(entry_id)
        return (c[0], c[1]) if c else (0, None)

    def protocol(self, entry: Entry) -> ProtocolEntry:
        """``entry`` in the protocol's shape, with its recall counters."""
        count, last = self.get(entry.id)
        return entry.to_protocol(count, last)

    def count(self, entry_id: str) -> int:
        c = self._counts.get(entry_id)
        return c[0] if c else 0

    def bump(self, ids: Iterable[str], ts: int) -> None:
        ids = list(ids)
        if not ids:
            return
        line = f"{ts} {' '.join(ids)}\n".encode("ascii")
        fd = self._open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            atomic.write_all(fd, line)
        finally:
            os.close(fd)
        # fold our own line now; refresh() will skip it by offset only if nobody else wrote
        self.refresh()

    def needs_compaction(self) -> bool:
        try:
            return os.path.getsize(self.log_path) > COMPACT_AT
        except FileNotFoundError:
            return False

    def compact(self, live_ids: set[str]) -> None:
        """Fold the log into the base file (store lock held by the caller)."""
        self.refresh()
        data = {k: v for k, v in self._counts.items() if k in live_ids}
        # durable: the log it folds is deleted next, so the base must be on disk first
        atomic.atomic_write(self.base_path, json.dumps(data, separators=(",", ":")).encode(),
                            durable=True)
        os.unlink(self.log_path)
        self._base_id = None
        self.refresh()
