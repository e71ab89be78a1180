"""A file's flush to disk in a helper thread, while the caller goes on.

A write's one ``fdatasync`` (of the write-ahead log, :mod:`.wal`) is 0.2-0.3 ms of
waiting on the disk, and the write has work that does not depend on it (its pack, which
no ref names until the flush is done). :func:`flush_while` starts the flush on the
process's helper thread (:func:`.helper.beside`; it waits without Python's lock), does that
work meanwhile, and returns once both are done.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from filemem.files import helper


def _sync(fd: int) -> None:
    getattr(os, "fdatasync", os.fsync)(fd)  # looked up each time: a test may stand in


def flush_while(fd: int, work: Callable[[], object] | None = None) -> None:
    """fdatasync ``fd`` while ``work`` runs; return once both are done (``fd`` must stay
    open until then). Raises ``work``'s error if it failed (after the flush), else the
    flush's."""
    if work is None:
        _sync(fd)
        return
    flush = helper.beside(lambda: _sync(fd))
    try:
        work()
    except BaseException:
        flush.wait()  # the work's error is the one raised (the caller undoes its own)
        raise
    failed = flush.wait()
    if failed is not None:
        raise failed
