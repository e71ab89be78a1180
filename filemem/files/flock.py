"""filemem's one lock-file primitive: an exclusive lock on an open file, taken without
blocking and retried until a deadline (the store lock, the sync lock, the audit counter).

POSIX: ``fcntl.flock``, the call portalocker itself makes there, so a lock taken here and
one taken through portalocker (by an older filemem) exclude each other. portalocker is
imported only where there is no ``fcntl`` (Windows): importing it costs more than a whole
cold ``filemem snapshot`` spends on its own work (its version lookup loads
``importlib.metadata``), and a cold ``filemem add`` took the store lock through it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, Any, Final

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
            opener: Callable[[str, int], int] = os.open,
            waiting: Callable[[], None] | None = None) -> IO[bytes]:
    """The file at ``path`` opened (``opener(path, flags)``, which creates it if ``flags``
    say so) and locked, tried every ``interval`` s for up to ``timeout`` s (0: once); Busy
    after that, with the file closed again. OSError from opening it is the caller's.
    ``waiting``: called once the wait has lasted :data:`NOTICE_AFTER` s."""
    f = os.fdopen(opener(path, flags), "r+b" if flags & os.O_RDWR else "ab", buffering=0)
    try:
        wait = _Wait(timeout, waiting)
        while not try_lock(f):
            if wait.over():
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


NOTICE_AFTER: Final = 1.0  # s of waiting for a lock after which the person is told


class _Wait:
    """A wait for a lock up to a deadline, which says so once it has lasted NOTICE_AFTER s
    (a minute's wait in silence looks like a hang)."""

    def __init__(self, timeout: float, waiting: Callable[[], None] | None) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + timeout
        self.waiting = waiting

    def over(self) -> bool:
        """Whether the deadline has passed (then the caller gives up)."""
        now = time.monotonic()
        if now >= self.deadline:
            return True
        if now - self.start >= NOTICE_AFTER:
            self.tell()
        return False

    def tell(self) -> None:
        """Say that the wait goes on (once)."""
        if self.waiting is not None:
            waiting, self.waiting = self.waiting, None
            waiting()


def holder(path: str) -> str | None:
    """Who holds the lock on the file at ``path``, in words (``pid 1234: filemem sync``),
    from ``/proc/locks`` (Linux); None where that cannot be told."""
    try:
        st = os.stat(path)
        with open("/proc/locks", "rb") as f:
            lines = f.read().decode("ascii", "replace").splitlines()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        fields = line.split()  # "1: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"
        if len(fields) < 6 or fields[1] != "FLOCK":  # ("1: -> FLOCK ...": one waiting)
            continue
        try:
            major, minor, ino = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(ino)) == want:
                pid = int(fields[4])
                return f"pid {pid}{_command(pid)}"
        except ValueError:
            continue
    return None


def _command(pid: int) -> str:
    """``: `` and the command line of process ``pid`` (its interpreter and folders left
    out), or nothing if it cannot be read."""
    if pid == os.getpid():
        return " (this process)"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0") if a]
    except OSError:
        return ""
    if len(args) > 1 and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
    if not args:
        return ""
    words = " ".join(" ".join([os.path.basename(args[0]), *args[1:]]).split())  # one line
    return f": {words[:117]}..." if len(words) > 120 else f": {words}"


class Kept:
    """A lock file a process takes over and over (the store lock: every write), opened once
    and locked again for each hold: one ``flock`` and one ``stat`` a hold, where opening,
    locking and closing it took five calls. Once locked, the path is checked to name the
    file still (a lock file deleted or replaced meanwhile would be locked alone): if not,
    it is opened anew. Threads of one process share the open file, whose lock would not
    exclude them, so they also take turns on a thread lock. A forked child opens its own
    (the parent's open file is the parent's lock). Where there is no ``fcntl`` (Windows),
    each hold opens the file, as :func:`acquire`."""

    def __init__(self, path: str, flags: int,
                 opener: Callable[[str, int], int] = os.open) -> None:
        self.path, self.flags, self.opener = path, flags, opener
        self._turn = threading.Lock()
        self._fd: int | None = None
        self._ino: tuple[int, int] = (0, 0)
        self._file: IO[bytes] | None = None  # Windows: the file of the current hold
        self._closing: weakref.finalize[[int], Kept] | None = None  # closes it if dropped
        _all.add(self)

    def hold(self, timeout: float, interval: float,
             waiting: Callable[[], None] | None = None) -> int:
        """Take the lock as :func:`acquire` does (Busy after ``timeout``, ``waiting`` called
        once it has lasted :data:`NOTICE_AFTER` s); the open file's descriptor, to read or
        write the file through while held."""
        wait = _Wait(timeout, waiting)
        if not self._turn.acquire(timeout=min(max(timeout, 0.0), NOTICE_AFTER)):
            left = wait.deadline - time.monotonic()  # another thread of this process has it
            if left <= 0:
                raise Busy(self.path)
            wait.tell()
            if not self._turn.acquire(timeout=left):
                raise Busy(self.path)
        try:
            if fcntl is None:
                left = max(wait.deadline - time.monotonic(), 0.0)
                self._file = acquire(self.path, self.flags, left, interval, self.opener,
                                     wait.waiting)
                return self._file.fileno()
            while True:
                fd = self._open()
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if wait.over():
                            raise Busy(self.path) from None
                        time.sleep(interval)
                try:
                    st = os.stat(self.path, follow_symlinks=False)
                    if (st.st_dev, st.st_ino) == self._ino:
                        return fd
                except FileNotFoundError:
                    pass
                fcntl.flock(fd, fcntl.LOCK_UN)  # a file no longer at the path: open anew
                self._drop()
        except BaseException:
            self._turn.release()
            raise

    def release(self) -> None:
        """Let go of the lock; the file stays open for the next hold."""
        try:
            if self._file is not None:
                file, self._file = self._file, None
                release(file)
            elif self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._turn.release()

    def close(self) -> None:
        """Close the kept file; the next hold opens it again. While a thread holds the
        lock, nothing is closed (its file is closed when this object goes)."""
        if not self._turn.acquire(blocking=False):
            return
        try:
            self._drop()
        finally:
            self._turn.release()

    def _drop(self) -> None:
        fd, self._fd = self._fd, None
        if self._closing is not None:
            self._closing.detach()
            self._closing = None
        if fd is not None:
            _close_quietly(fd)

    def _open(self) -> int:
        if self._fd is None:
            fd = self.opener(self.path, self.flags)
            try:
                st = os.fstat(fd)
            except BaseException:
                os.close(fd)
                raise
            self._fd, self._ino = fd, (st.st_dev, st.st_ino)
            self._closing = weakref.finalize(self, _close_quietly, fd)
        return self._fd

    def _forked(self) -> None:
        self._turn = threading.Lock()
        self._file = None
        self._drop()  # the parent's lock stays the parent's: closing a copy keeps it


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


_all: weakref.WeakSet[Kept] = weakref.WeakSet()


def _after_fork() -> None:
    for kept in list(_all):
        kept._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
