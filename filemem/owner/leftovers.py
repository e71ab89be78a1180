"""What a killed fetch or push leaves in a git folder, and when it is safe to remove.

None of it harms git (nothing refers to it), but some would stop the next transfer (a
ref's lock, a pack index dulwich was writing) and the rest is as big as what the transfer
carried. In the store's own ``.git`` the sync holds the locks that keep every live writer
out, so all of it goes; in a local remote another machine's push may be writing right now,
so only what nobody has written for a while (:data:`STALE_TEMP_PACK`, :data:`STALE_REF_LOCK`)
is taken for a dead one's.

- dulwich: ``tmp*.pack`` with no index and ``tmp_pack_*`` (a fetch or a push), and
  ``pack-<sha>.idx.lock`` (an index being written when it was killed);
- git's ``receive-pack`` (a ``git push``): its quarantine, ``objects/tmp_objdir-incoming-*``,
  a folder holding the pushed pack until the hooks accept it;
- either: ``refs/heads/<branch>.lock``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from typing import Final

STALE_REF_LOCK: Final = 5.0  # seconds: a ref lock this old on a local remote is a dead push's
STALE_TEMP_PACK: Final = 600.0  # seconds unwritten: a temporary pack there is a dead push's
PACK_INDEX_LOCK: Final = re.compile(r"pack-[0-9a-f]{40,64}\.idx\.lock\Z")
_DULWICH_TMP_PACK: Final = re.compile(r"tmp[a-z0-9_]{8}\.pack\Z")
_QUARANTINE: Final = "tmp_objdir-incoming-"


def ref_lock_cleared(lock: str) -> bool:
    """git and dulwich move a ref by writing ``<ref>.lock`` and renaming it, which takes
    milliseconds; a lock still there after a few seconds is what a killed push left, and
    it would block every later push. Wait that long, then remove it; False if it is still
    being renewed (another push is running)."""
    deadline = time.monotonic() + STALE_REF_LOCK
    while os.path.exists(lock):
        try:
            age = time.time() - os.stat(lock).st_mtime
        except FileNotFoundError:
            return True
        if age >= STALE_REF_LOCK:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def clear_temp_packs(git_dir: str, older_than: float | None = None) -> None:
    """Remove the temporary packs and quarantines a killed fetch or push left (above).
    ``older_than``: only those unwritten for that many seconds (a local remote)."""
    objects = os.path.join(git_dir, "objects")
    pack_dir = os.path.join(objects, "pack")
    found: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        found += [os.path.join(pack_dir, name) for name in os.listdir(pack_dir)
                  if _DULWICH_TMP_PACK.match(name)
                  and not os.path.exists(os.path.join(pack_dir, name[:-5] + ".idx"))]
    quarantines: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(objects):
            if name.startswith("tmp_pack_"):
                found.append(os.path.join(objects, name))
            elif name.startswith(_QUARANTINE):
                quarantines.append(os.path.join(objects, name))
    for path in found:
        with contextlib.suppress(FileNotFoundError):
            if older_than is None or time.time() - os.stat(path).st_mtime >= older_than:
                os.unlink(path)
    for path in quarantines:
        if older_than is None or time.time() - _last_written(path) >= older_than:
            shutil.rmtree(path, ignore_errors=True)
    clear_pack_index_locks(pack_dir, older_than)


def _last_written(folder: str) -> float:
    """The newest modification time in ``folder`` and below (a pack being received grows
    inside a folder whose own time does not move); now if it cannot be read."""
    try:
        newest = os.stat(folder).st_mtime
        for top, _dirs, files in os.walk(folder):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, os.stat(os.path.join(top, name)).st_mtime)
        return newest
    except OSError:
        return time.time()


def clear_pack_index_locks(pack_dir: str, older_than: float | None = None) -> None:
    """dulwich moves a received pack in as ``pack-<sha>.pack``, then writes its index to
    ``pack-<sha>.idx.lock`` and renames that to ``.idx``. A transfer killed in between
    leaves the lock (and a pack nothing reads, having no index), and the next transfer of
    the same objects stops on the lock (``dulwich.file.FileLocked``). git never writes such
    a lock (its index is a ``tmp_idx_*`` renamed into place), so each is dulwich's: remove
    it and its pack, unless that pack has its index. ``older_than`` as for temporary packs:
    the caller holds the locks that keep a live writer out, or only one unwritten for that
    long is taken for a dead one's."""
    with contextlib.suppress(FileNotFoundError):
        names = set(os.listdir(pack_dir))
        for name in sorted(n for n in names if PACK_INDEX_LOCK.match(n)):
            lock = os.path.join(pack_dir, name)
            base = name[:-len(".idx.lock")]
            with contextlib.suppress(FileNotFoundError):
                if older_than is not None and time.time() - os.stat(lock).st_mtime < older_than:
                    continue
                os.unlink(lock)
                if base + ".idx" not in names:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(pack_dir, base + ".pack"))
