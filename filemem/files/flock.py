"""filemem's one lock-file primitive: an exclusive lock on an open file, taken without
blocking and retried until a deadline (the store lock, the sync lock, the audit counter).

POSIX: ``fcntl.flock``, the call portalocker itself makes there, so a lock taken here and
one taken through portalocker (by an older filemem) exclude each other. portalocker is
imported only where there is no ``fcntl`` (Windows): importing it costs more than a whole
cold ``filemem snapshot`` spends on its own work (its version lookup loads
``importlib.metadata``), and a cold ``filemem add`` took the store lock through it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


# a lock file that lives for good, written to by no one: created if need be, opened to
# append (os.open makes it non-inheritable already; O_CLOEXEC is not there on Windows)
LOCK_FILE = os.O_WRONLY | os.O_CREAT | os.O_APPEND


class Busy(Exception):
    """The lock stayed taken by another process (or open file) for the whole wait."""


def try_lock(f: IO[Any]) -> bool:
    """Take the lock on ``f``; False if another process (or open file) holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import portalocker

    try:
        portalocker.lock(f, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
    except portalocker.LockException:
        return False
    return True


def unlock(f: IO[Any]) -> None:
    if fcntl is not None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return
    import portalocker

    portalocker.unlock(f)


def acquire(path: str, flags: int, timeout: float, interval: float,
            opener: Callable[[str, int], int] = os.open) -> IO[bytes]:
    """The file at ``path`` opened (``opener(path, flags)``, which creates it if ``flags``
    say so) and locked, tried every ``interval`` s for up to ``timeout`` s (0: once); Busy
    after that, with the file closed again. OSError from opening it is the caller's."""
    f = os.fdopen(opener(path, flags), "r+b" if flags & os.O_RDWR else "ab", buffering=0)
    try:
        deadline = time.monotonic() + timeout
        while not try_lock(f):
            if time.monotonic() >= deadline:
                raise Busy(path)
            time.sleep(interval)
    except BaseException:
        f.close()
        raise
    return f


def release(f: IO[bytes]) -> None:
    """Let go of a lock :func:`acquire` took, and close its file."""
    try:
        unlock(f)
    finally:
        f.close()
