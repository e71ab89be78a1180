"""The store lock: one writer at a time, across the threads of a process and across
processes (``.filemem/lock``, kept open between holds: :class:`filemem.files.flock.Kept`),
taken again freely by the thread that holds it. A wait says so once it has lasted a second,
naming the process that holds the lock where the system tells (a minute's silence looks
like a hang), and gives up with StoreBusy after :data:`LOCK_TIMEOUT`."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Final

from filemem import errors
from filemem.files import flock
from filemem.store.logs import log
from filemem.store.names import open_private, read_only

LOCK_TIMEOUT: Final = 60.0


class StoreLock:
    """The lock of the store at ``root``, whose ``.filemem`` folder is ``meta``; ``thread``:
    the store's lock for its threads, which guards its view of HEAD too."""

    def __init__(self, root: str, meta: str, thread: threading.RLock) -> None:
        self.root = root
        self.path = os.path.join(meta, "lock")
        self.thread = thread
        # never through a link: the owner's only
        self._file = flock.Kept(self.path, flock.LOCK_FILE, open_private)
        self._depth = 0

    def _holder(self) -> str:
        return flock.holder(self.path) or "another filemem process"

    @contextlib.contextmanager
    def held(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock (StoreBusy after ``timeout``, default LOCK_TIMEOUT; StoreReadOnly
        if it cannot be written)."""
        wait = LOCK_TIMEOUT if timeout is None else timeout

        def waiting() -> None:
            log.warning("filemem: waiting for the store lock %s, held by %s (up to %.0f s)",
                        self.path, self._holder(), wait)

        with self.thread:
            if self._depth == 0:
                try:
                    self._file.hold(wait, 0.002, waiting)
                except flock.Busy:
                    raise errors.StoreBusy(
                        f"the store is busy: its lock {self.path} has been held by "
                        f"{self._holder()} for more than {wait:.0f} s; nothing was written; "
                        "try again when that process has finished") from None
                except OSError as exc:
                    if not read_only(exc):
                        raise
                    raise errors.StoreReadOnly(
                        self.root, f"cannot write {self.path}: {exc.strerror}") from None
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._file.release()

    def close(self) -> None:
        """Close the kept lock file (kept open while a thread holds the lock)."""
        self._file.close()
