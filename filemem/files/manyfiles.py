"""Many working-tree files written at once (a seed, an import, a sync that brings many).

Where creating a file means waiting for the disk (ext4 allocating an inode next to recently
deleted ones, a network file system), the waits overlap when a few threads write; where it
does not (tmpfs, a warm cache), threads only take turns at Python's interpreter lock and
make it slower. Measured on a 2-core machine, 1,000 new files: tmpfs ~12 ms from one thread,
~13-22 ms from 2-8; ext4 ~25-35 ms either way when it is quick, and ~80-110 ms from one
thread against ~40-55 ms from 2-8 when it is slow. So the first :data:`PROBE` files are
written by the caller's thread, timed, and the rest go to :data:`WRITERS` threads only if
those took longer than :data:`SLOW_FILE` each. Either way the same files are written with
the same content; the folders on the way are checked for a symbolic link once per folder
instead of once per file, and where many new files go into one folder, each is created by
its name in that folder, opened once (where ``os.open`` takes a folder: not on Windows),
instead of by a path the kernel walks for each file (1,000 new files on tmpfs: ~15 ms
through ``worktree.write``, ~11 this way).
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Final

from filemem.files import atomic, worktree

PROBE: Final = 32  # files written from the caller's thread before deciding
SLOW_FILE: Final = 50e-6  # s per file: slower than this, the disk is being waited for
WRITERS: Final = 4
BY_FOLDER: Final = 8  # new files in one folder from which it is opened once for them


def write_files(root: str, files: dict[str, bytes], new: set[str],
                checked: set[str] | None = None) -> dict[str, os.stat_result]:
    """Write working-tree files (``new``: created exclusively); their stats, in the order of
    ``files``. ``checked``: folders already found inside the store and no link in the same
    write (see :func:`worktree.guard`), not looked at again. Every thread has stopped before
    a failure is raised (the journal then repairs the working tree, as for a kill)."""
    items = list(files.items())
    checked = set() if checked is None else checked
    for path in files:  # each folder looked at once, before the probe times file creation
        worktree.guard(root, path, checked)
    per_folder = collections.Counter(p.rpartition("/")[0] for p in files if p in new)
    with _opened(root, {f for f, n in per_folder.items() if n >= BY_FOLDER}) as folders:
        def write(part: list[tuple[str, bytes]]) -> list[tuple[str, os.stat_result]]:
            done = []
            for p, d in part:
                folder, _, name = p.rpartition("/")
                fd = folders.get(folder)  # open if it takes many new files
                done.append((p, atomic.create_new(name, d, durable=False, dir_fd=fd)
                             if fd is not None and p in new else
                             worktree.write(root, p, d, new=p in new, checked=checked)))
            return done

        return _written(items, write)


def _written(items: list[tuple[str, bytes]],
             write: Callable[[list[tuple[str, bytes]]], list[tuple[str, os.stat_result]]]
             ) -> dict[str, os.stat_result]:
    """``write`` over ``items``: the first PROBE from this thread, the rest from this
    thread too or from WRITERS threads, as the probe's pace says."""
    start = time.perf_counter()
    out = dict(write(items[:PROBE]))
    rest = items[PROBE:]
    if not rest:
        return out
    if time.perf_counter() - start <= SLOW_FILE * PROBE:
        out.update(write(rest))
        return out
    # imported here: a cold command that only reads never loads it (nor logging)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="filemem-mirror") as pool:
        parts = [pool.submit(write, rest[k::WRITERS]) for k in range(WRITERS)]
    done = {p: st for f in parts for p, st in f.result()}
    out.update((p, done[p]) for p, _d in rest)
    return out


@contextlib.contextmanager
def _opened(root: str, folders: set[str]) -> Iterator[dict[str, int]]:
    """``folders`` (store folders checked by worktree.guard, under the store lock) opened,
    each made if missing, closed on exit; a folder left out is written into by path
    (``os.open`` takes no folder here, or it cannot be opened: ``worktree.write`` then
    says why)."""
    fds: dict[str, int] = {}
    try:
        if os.open in os.supports_dir_fd:
            for folder in folders:
                fd = _open_folder(worktree.full_path(root, folder) if folder else root)
                if fd is not None:
                    fds[folder] = fd
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _open_folder(path: str) -> int | None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | atomic.NOFOLLOW
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        return os.open(path, flags)
    except OSError:
        return None
