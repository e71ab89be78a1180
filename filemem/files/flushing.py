"""A file's flush to disk in a helper thread, while the caller goes on.

A write's one ``fdatasync`` (of the write-ahead log, :mod:`.wal`) is 0.2-0.3 ms of
waiting on the disk, and the write has work that does not depend on it (its pack, which
no ref names until the flush is done). :func:`flush_while` starts the flush in a helper
thread (it waits without Python's lock), does that work meanwhile, and returns once both
are done. One helper thread per process, started on first use (again in a forked child).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Final

from filemem.files.helper import Helper


def _sync(fd: int) -> None:
    getattr(os, "fdatasync", os.fsync)(fd)  # looked up each time: a test may stand in


def flush_while(fd: int, work: Callable[[], object] | None = None) -> None:
    """fdatasync ``fd`` while ``work`` runs; return once both are done. Raises ``work``'s
    error if it failed (after the flush), else the flush's."""
    if work is None:
        _sync(fd)
        return
    flush = _Flush(fd)
    try:
        work()
    except BaseException:
        flush.wait()  # the work's error is the one raised (the caller undoes its own)
        raise
    failed = flush.wait()
    if failed is not None:
        raise failed


class _Flush:
    """One flush handed to the helper; ``fd`` must stay open until :meth:`wait`."""

    __slots__ = ("_done", "_error", "_fd")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._done = threading.Lock()
        self._done.acquire()  # released by the helper once the flush returned
        self._error: BaseException | None = None
        _helper.put(self)

    def run(self) -> None:
        try:
            _sync(self._fd)
        except BaseException as exc:  # handed to the waiter
            self._error = exc
        finally:
            self._done.release()

    def wait(self) -> BaseException | None:
        """Return once the flush is done (even if interrupted meanwhile: the caller then
        closes the descriptor the helper is using), with its error if it failed."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.acquire()
                break
            except BaseException as exc:  # Ctrl-C: raised once the flush is over
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted
        return self._error


_helper: Final = Helper("filemem-flush", _Flush.run)
