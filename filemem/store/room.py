"""Before a write's commit point: can the store take all of it? Every working-tree folder
the write puts a file in is writable by this process, and its file system has room for
what the write puts down. A write refused here has written nothing (STORE_READ_ONLY,
STORE_FULL); one that passes does not run out halfway through mirroring its commit into the
working tree, which would leave git's index behind HEAD. One ``statvfs``, one ``stat`` and
an ``access`` a folder (one, for most writes): about 8 µs of every write."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from filemem import errors
from filemem.files.gitrepo import PendingObjects

if TYPE_CHECKING:
    from filemem.store.core import Store

MARGIN: Final = 16 * 1024  # what the estimate may miss: reflog lines, a folder's new block
INDEX_ENTRY: Final = 100  # an index entry's bytes beside its path (62 + padding)


def check(store: Store, changes: Mapping[str, bytes | None],
          pending: PendingObjects | None) -> None:
    """StoreReadOnly naming the first folder the write cannot put its files in, StoreFull if
    the store's file system has less room than the write needs plus :data:`MARGIN`: the
    entry files, a new copy of git's index, the pack and its index (or the journal), the
    write-ahead log's record, the branch's lock file."""
    git = store.git
    root = store.root
    # the working tree's folders only: a file `.git` or `.filemem` refuses is refused before
    # the branch moves (Store.disk_full_is_reported: STORE_READ_ONLY), while the working
    # tree is written after it, where a refusal would leave git's index behind HEAD
    for folder in {f"{root}/{p.rpartition('/')[0]}": 0 for p in changes}:
        while not os.access(folder, os.W_OK | os.X_OK):  # a new folder: where it is made
            if len(folder) <= len(root) or os.path.isdir(folder):
                raise errors.StoreReadOnly(
                    root, f"this user cannot create files in {folder}; make it writable "
                    f"(`chmod -R u+w {folder}`), or write as the user who owns it")
            folder = os.path.dirname(folder)
    fs = os.statvfs(root)
    if fs.f_flag & os.ST_RDONLY:
        raise errors.StoreReadOnly(root, "its file system is mounted read-only; "
                                   "remount it read-write to write")
    block = fs.f_frsize or 512
    try:
        index = os.stat(git.file_of("index")).st_size
    except FileNotFoundError:
        index = 0
    files = sum(_blocks(len(d), block) for d in changes.values() if d is not None)
    objects = pending.items.values() if pending is not None else ()
    count, raw = len(objects), sum(len(body) for _kind, body in objects)
    paths = sum(len(p) for p in changes)
    need = files + _blocks(index + paths + INDEX_ENTRY * len(changes), block) \
        + _blocks(raw + 32 * count + 64, block) + _blocks(1100 + 28 * count, block) \
        + _blocks(raw + 64 * count + 2 * paths + 100 * len(changes), block) \
        + 2 * block + MARGIN
    free = fs.f_bavail * block
    if free < need:
        raise errors.StoreFull(
            f"the disk holding the store {store.root} is full ({_kb(free)} free, this write "
            f"needs about {_kb(need)}); nothing was written; free some space and try again")


def _blocks(size: int, block: int) -> int:
    """The bytes a file of ``size`` takes on the disk: whole blocks, one at least."""
    return max(1, -(-size // block)) * block


def _kb(n: int) -> str:
    return f"{-(-n // 1024)} KB"

