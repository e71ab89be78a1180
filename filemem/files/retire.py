"""git's files that a write replaces are let go of after the write, not during it.

On ext4 (measured on this project's machine) freeing a file's inode and blocks is most of
what replacing a small file by a rename costs: 150-500 µs, where the rename itself takes
about 40 µs. A write replaces two such files through git's lock-file protocol (the
branch's ref and git's index). A file that is still open is freed at its last close
instead, so within :func:`deferred`, :func:`replace` keeps the old file open across the
rename, and when the block ends (after the store lock is released) one daemon thread
closes what was kept. Nothing about the write changes: the new names are in place, and
flushed where the write flushes, before the old files are let go. A crash before the close
leaves an orphaned inode, which the file system reclaims as it does for any deleted file
that was still open.

Only for files in ``.git/``: on NFS an open file replaced is renamed ``.nfsXXXX`` until it
is closed, which git ignores there but would show among the working tree's files. Where a
rename over an open file is refused (some SMB mounts), the file is closed and the rename
made again as before. POSIX only: Windows cannot rename over an open file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator

from filemem.files.helper import Helper

_ON: bool = os.name == "posix"
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_local = threading.local()  # .held: the open files of the current deferred() block


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, the old files :func:`replace` keeps open are closed after it, on
    the closing thread (nested blocks: after the outermost)."""
    if getattr(_local, "held", None) is not None:
        yield
        return
    held: list[int] = []
    _local.held = held
    try:
        yield
    finally:
        _local.held = None
        for fd in held:
            _closer.put(fd)


def replace(src: str, dst: str) -> None:
    """``os.replace(src, dst)``; within :func:`deferred`, ``dst``'s old file is closed (and
    so freed) only after the block."""
    held: list[int] | None = getattr(_local, "held", None)
    fd = _open_regular(dst) if held is not None and _ON else None
    if held is None or fd is None:
        os.replace(src, dst)
        return
    try:
        os.replace(src, dst)
    except OSError:
        os.close(fd)  # refused while it is open (or failed anyway): as without this
        os.replace(src, dst)
        return
    held.append(fd)


def _open_regular(path: str) -> int | None:
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None  # none there yet (or a link, replaced as a link): nothing to keep
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def drain() -> None:
    """Wait until every file handed over so far is closed (benchmarks: before a floor
    sample, so the freeing does not run inside it)."""
    if not _closer.started:
        return
    done = threading.Event()
    _closer.put(done)
    done.wait()


def _close(item: int | threading.Event) -> None:
    if isinstance(item, threading.Event):
        item.set()
    else:
        with contextlib.suppress(OSError):
            os.close(item)


def _forked() -> None:
    """A forked child holds none of its parent's deferred files."""
    _local.held = None


_closer: Helper[int | threading.Event] = Helper("filemem-retire", _close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
