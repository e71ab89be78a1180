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
instead of once per file.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from filemem.files import worktree

PROBE: Final = 32  # files written from the caller's thread before deciding
SLOW_FILE: Final = 50e-6  # s per file: slower than this, the disk is being waited for
WRITERS: Final = 4


def write_files(root: str, files: dict[str, bytes], new: set[str]) -> dict[str, os.stat_result]:
    """Write working-tree files (``new``: created exclusively); their stats, in the order of
    ``files``. Every thread has stopped before a failure is raised (the journal then repairs
    the working tree, as for a kill)."""
    items = list(files.items())
    checked: set[str] = set()
    out: dict[str, os.stat_result] = {}

    def write(part: list[tuple[str, bytes]]) -> list[tuple[str, os.stat_result]]:
        return [(p, worktree.write(root, p, d, new=p in new, checked=checked)) for p, d in part]

    for path in files:  # each folder looked at once, before the probe times file creation
        worktree.guard(root, path, checked)
    start = time.perf_counter()
    out.update(write(items[:PROBE]))
    rest = items[PROBE:]
    if not rest:
        return out
    if time.perf_counter() - start <= SLOW_FILE * PROBE:
        out.update(write(rest))
        return out
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="filemem-mirror") as pool:
        parts = [pool.submit(write, rest[k::WRITERS]) for k in range(WRITERS)]
    done = {p: st for f in parts for p, st in f.result()}
    out.update((p, done[p]) for p, _d in rest)
    return out
