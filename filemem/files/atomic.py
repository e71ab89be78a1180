"""Replacing files whole: the one place filemem writes a file that someone may read.

* :func:`write_all` — ``os.write`` until every byte is written (it may write fewer).
* :func:`atomic_write` — temp file in the target's folder, write, fsync, rename over the
  target, fsync the folder: a reader sees the old file or the new one, never a mix; on any
  failure the temp file is removed and the target is untouched.
* :func:`create_new` — a file that must not exist yet, created in place (no rename); on a
  failure the partial file is removed.
* :func:`replace_many` — many files: every temp file written (and fsynced) before any is
  renamed, so a journaling file system commits them in one go; nothing short is ever
  renamed into place and every temp file is removed on a failure.
* :func:`open_nofollow` / :func:`read_nofollow` — open or read a file, never through a
  symbolic link (O_NOFOLLOW; :class:`LinkRefused` if ``path`` is a link); read_nofollow
  reads only a regular file (:class:`NotAFile` for a FIFO, a socket, a device). Replacing a file
  (the functions above) renames over the name, so a link there is replaced, never written
  through; new files are created exclusively (O_EXCL does not follow a link either).
* :class:`LockFile` — git's ``<path>.lock`` protocol (dulwich's GitFile): the lock file,
  created exclusively, is the mutex and the new content at once; committed by renaming it
  over ``path``, aborted by deleting it.

``durable`` is always the caller's explicit choice: with it the data is fsynced before the
rename and the folder after it (the write survives a power cut once the call returns);
without it a crash may lose the write, but never leaves a torn file under the real name.
This module depends on nothing else in filemem.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from collections.abc import Sequence
from types import TracebackType
from typing import Final

from filemem.files import retire

TMP_SUFFIX: Final = ".tmp"
NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_counter = itertools.count()


class LinkRefused(OSError):
    """A symbolic link where filemem reads or writes a file: never followed."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ELOOP, "is a symbolic link", path)


_KINDS: Final = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def special(mode: int) -> bool:
    """Whether ``st_mode`` is a FIFO, a socket or a device: never opened to be read."""
    return any(test(mode) for test, _name in _KINDS)


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words (from its ``st_mode``)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotAFile(OSError):
    """Something other than a regular file (a FIFO, a socket, a device) where filemem reads
    a file: reading a FIFO would wait forever for a writer, a device may never end."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(errno.EINVAL, f"is {kind_of(mode)}, not a regular file", path)
        self.kind = kind_of(mode)


def open_nofollow(path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that refuses (:class:`LinkRefused`) a symbolic link at ``path`` rather than
    opening what it points to. Where O_NOFOLLOW does not exist (Windows), an lstat first."""
    if not NOFOLLOW and os.path.islink(path):
        raise LinkRefused(path)
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise LinkRefused(path) from None
        raise


def read_nofollow(path: str) -> bytes:
    """A whole regular file's bytes, never through a symbolic link (:class:`LinkRefused`).
    Opened without blocking (a FIFO's open would wait for a writer), then :class:`NotAFile`
    unless it is a regular file."""
    fd = open_nofollow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # as reading it would say
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise NotAFile(path, mode)
        return f.read()


def read_small(path: str) -> bytes:
    """A small file's bytes (a ref, HEAD) by ``os.open`` and ``os.read``: microseconds less
    than ``open()``, which builds a buffered file object; HEAD is read before every read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 4096)
        if len(data) < 4096:  # a regular file read short has ended: no second call
            return data
        while chunk := os.read(fd, 65536):  # regular files end with an empty read
            data += chunk
        return data
    finally:
        os.close(fd)


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """A file as a stat saw it (inode, size, modification and change times): a file
    replaced (a rename: a new inode) or changed in place (its size or times) no longer
    matches; what the caches of small files and logs compare before they read again."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def identity_at(path: str) -> tuple[int, int, int, int] | None:
    """:func:`identity` of the file at ``path`` (followed if a link), None if none is there."""
    try:
        return identity(os.stat(path))
    except FileNotFoundError:
        return None


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``: ``os.write`` may write fewer bytes than asked (a
    signal, a pipe, a nearly full disk); a write of nothing raises ENOSPC, as does a full
    disk itself."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, "write made no progress (disk full?)")
        view = view[written:]


def fsync_dir(path: str) -> None:
    """Make the names in folder ``path`` durable (a rename or a new file in it). Windows
    cannot open a folder; there the rename is as durable as NTFS makes it."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(path: str, *, prefix: str = ".", suffix: str = TMP_SUFFIX) -> str:
    """A fresh temp-file name beside ``path``: ``<folder>/<prefix><name>.<pid>.<n><suffix>``
    (unique within the process; :func:`_open_temp` creates it exclusively)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f"{prefix}{name}.{os.getpid()}.{next(_counter)}{suffix}")


def _open_temp(path: str, mode: int, prefix: str, suffix: str) -> tuple[int, str]:
    while True:
        tmp = temp_name(path, prefix=prefix, suffix=suffix)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp
        except FileExistsError:
            continue  # left by a killed process that had our pid: take the next name


def _unlink(path: str, dir_fd: int | None = None) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path, dir_fd=dir_fd)


def atomic_write(path: str, data: bytes, *, durable: bool, mode: int = 0o600,
                 prefix: str = ".", suffix: str = TMP_SUFFIX) -> None:
    """Replace (or create) ``path`` with ``data`` atomically.

    ``mode`` is the new file's permission bits before the umask (filemem's files, exports
    included, are ``0o600``). ``prefix``/``suffix`` shape the temp file's name, for callers
    that recognise their own leftovers (:func:`remove_temps`). If the folder fsync fails
    after the rename, the new content is in place and the error is raised."""
    fd, tmp = _open_temp(path, mode, prefix, suffix)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


def create_new(path: str, data: bytes, *, durable: bool, mode: int = 0o600,
               dir_fd: int | None = None) -> os.stat_result:
    """Create ``path``, which must not exist (FileExistsError otherwise), with ``data``,
    directly: half the system calls of :func:`atomic_write`, for files nobody reads before
    the caller is done. A failed write removes the partial file. Returns its stat.
    ``dir_fd``: ``path`` is a name in that open folder (many files into one folder: the
    folder is looked up once, not once a file); not with ``durable``."""
    assert dir_fd is None or not durable
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, dir_fd=dir_fd)
    try:
        try:
            written = os.write(fd, data)  # all of it, nearly always: one call
            if written != len(data):
                write_all(fd, data[written:])
            if durable:
                os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(path, dir_fd)
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")
    return st


def replace_many(files: Sequence[tuple[str, bytes]], *, durable: bool, mode: int = 0o600,
                 prefix: str = ".", suffix: str = TMP_SUFFIX, sync_dirs: bool | None = None,
                 undo: bool = False) -> None:
    """Write every ``(path, data)`` to a temp file, fsync them all (``durable``), then rename
    them into place in order.

    A failure before the renames leaves nothing behind; a failed rename removes the temp
    files not yet renamed, and with ``undo=True`` also the files already renamed that were
    not there before (a .pack without its .idx). ``sync_dirs`` (default: ``durable``) also
    fsyncs each folder after the renames."""
    temps: list[tuple[str, str]] = []  # (temp, final)
    renamed: list[str] = []
    try:
        fds: list[int] = []
        try:
            for path, data in files:
                fd, tmp = _open_temp(path, mode, prefix, suffix)
                fds.append(fd)
                temps.append((tmp, path))
                write_all(fd, data)
            if durable:
                for fd in fds:
                    os.fsync(fd)
        finally:
            failed: OSError | None = None
            for fd in fds:
                try:
                    os.close(fd)
                except OSError as exc:
                    failed = failed or exc
            if failed is not None:
                raise failed
        for tmp, path in temps:
            existed = undo and os.path.lexists(path)
            os.replace(tmp, path)
            if not existed:
                renamed.append(path)
    except BaseException:
        for tmp, _path in temps:
            _unlink(tmp)
        if undo:
            for path in renamed:
                _unlink(path)
        raise
    if durable if sync_dirs is None else sync_dirs:
        for folder in dict.fromkeys(os.path.dirname(p) or "." for _t, p in temps):
            fsync_dir(folder)


def remove_temps(path: str, *, prefix: str = ".", suffix: str = TMP_SUFFIX) -> list[str]:
    """Delete the temp files that writes of ``path`` by killed processes left (only with
    the lock that keeps every other writer of ``path`` out). Returns what was removed."""
    folder, name = os.path.split(path)
    start = f"{prefix}{name}."
    removed: list[str] = []
    try:
        names = os.listdir(folder or ".")
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for other in names:
        if other.startswith(start) and other.endswith(suffix):
            full = os.path.join(folder, other)
            _unlink(full)
            removed.append(full)
    return removed


class Locked(FileExistsError):
    """``<path>.lock`` exists: another writer (or a killed one) holds the lock."""


class LockFile:
    """git's lock-file protocol for replacing ``path`` (dulwich's GitFile, git's lockfile.c).

    ``<path>.lock`` is created exclusively (:class:`Locked` if it exists) and receives the
    new content; :meth:`commit` fsyncs it (``durable``), renames it over ``path`` and fsyncs
    the folder (``sync_dir``, default ``durable``); :meth:`abort` deletes it. As a context
    manager it aborts on leaving unless :meth:`commit` was called: an early return never
    puts a half-written lock file in place. After a commit the lock file name belongs to the
    next writer, so nothing here deletes it again.
    """

    def __init__(self, path: str, *, durable: bool, mode: int = 0o600,
                 sync_dir: bool | None = None) -> None:
        self.path = path
        self.lock_path = path + ".lock"
        self.durable = durable
        self.sync_dir = durable if sync_dir is None else sync_dir
        try:
            self._fd: int | None = os.open(self.lock_path,
                                           os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            raise Locked(errno.EEXIST, "locked by another writer", self.lock_path) from None
        self._done = False

    def write(self, data: bytes) -> None:
        if self._fd is None or self._done:
            raise ValueError(f"{self.lock_path} is already committed or aborted")
        write_all(self._fd, data)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def commit(self) -> None:
        """Put the written content in place of ``path`` (this releases the lock)."""
        if self._done:
            raise ValueError(f"{self.lock_path} is already committed or aborted")
        try:
            if self.durable and self._fd is not None:
                os.fsync(self._fd)
            self._close()
            retire.replace(self.lock_path, self.path)  # the old file freed after the write
        except BaseException:
            self.abort()
            raise
        self._done = True
        if self.sync_dir:
            fsync_dir(os.path.dirname(self.path) or ".")

    @property
    def open(self) -> bool:
        """Still held: neither committed nor aborted."""
        return not self._done

    def abort(self) -> None:
        """Release the lock without touching ``path`` (a no-op once committed or aborted)."""
        if self._done:
            return
        self._done = True
        try:
            self._close()
        finally:
            _unlink(self.lock_path)

    def __enter__(self) -> LockFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.abort()
