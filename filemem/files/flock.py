"""A non-blocking exclusive lock on an open file, for the small locks of the read path.

POSIX: ``fcntl.flock``, the call portalocker itself makes there, so a lock taken here and
one taken through portalocker exclude each other. portalocker is imported only where there
is no ``fcntl`` (Windows): importing it costs more than a whole cold ``filemem snapshot``
spends on its own work (its version lookup loads ``importlib.metadata``).
"""

from __future__ import annotations

from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


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
