"""When and how the store's loose objects go into packs (git's own ``gc --auto`` is off:
filemem packs under its store lock, where no write of its own is half done).

The write path calls :func:`due` every so many commits; it samples a few of the 256
loose-object folders and counts the packs (each write adds a small one, which
:mod:`.packwrite` rolls together in-process; what those merges leave piles up slowly), so
the check costs a few ``listdir`` calls whatever the history.
:func:`pack` then runs ``git repack --geometric=2 -d``: the loose objects go into one new
pack, and packs are rolled together only as far as needed to keep each at least twice the
size of the next smaller one. So a store keeps O(log n) packs, most repacks touch only the
small new packs (never all of history at each one, as ``repack -a`` would), and the full
roll-up that remains is rare and amortised. git reuses the deltas it already has, so a
repack's cost follows the objects it moves.

A repack killed at any instant leaves a valid repository: git writes the new pack and its
index under temporary names, renames them, and deletes the packs rolled up only after
that (a kill in between leaves duplicates, which the next repack folds). What it leaves
behind (``.tmp-*-pack-*``, ``tmp_pack_*``, ``tmp_idx_*``) is removed by the next repack when
older than :data:`STALE_TEMP` (a person's own ``git gc`` may be writing one right now).
Without the git CLI, dulwich packs the loose objects (no deltas) and folds every pack into
one once there are :data:`DULWICH_MAX_PACKS`.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import TYPE_CHECKING, Final

from filemem.files import gitcli, modes

if TYPE_CHECKING:
    from filemem.files.gitrepo import GitRepo

WHEN_LOOSE: Final = 6000  # estimated loose objects that make a repack due
WHEN_PACKS: Final = 48  # packs that make a repack due (writes add small ones: packwrite)
SAMPLE: Final = ("00", "3f", "7e", "bd")  # 4 of the 256 folders: 1/64 of the objects
GEOMETRIC_FACTOR: Final = 2
DULWICH_MAX_PACKS: Final = 16
STALE_TEMP: Final = 600.0  # seconds
_GIT_TEMP: Final = re.compile(r"^(\.tmp-\d+-pack-[0-9a-f]+\.\w+|tmp_(pack|idx|rev|bitmap)_\w+)$")


def loose_estimate(git_dir: str) -> int:
    """About how many loose objects ``git_dir`` holds (from 4 of its 256 folders)."""
    objects = os.path.join(git_dir, "objects")
    sample = 0
    for folder in SAMPLE:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            sample += len(os.listdir(os.path.join(objects, folder)))
    return sample * 256 // len(SAMPLE)


def due(git_dir: str) -> bool:
    return loose_estimate(git_dir) >= WHEN_LOOSE or pack_count(git_dir) >= WHEN_PACKS


def pack_count(git_dir: str) -> int:
    return len([n for n in modes.pack_names(git_dir) if n.endswith(".pack")])


def clear_killed_repack(git_dir: str, older_than: float = STALE_TEMP) -> list[str]:
    """Remove the temporary files a killed ``git repack`` left in ``objects/pack``."""
    folder = os.path.join(git_dir, "objects", "pack")
    removed = []
    for name in modes.pack_names(git_dir):
        if _GIT_TEMP.match(name):
            path = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):
                if time.time() - os.lstat(path).st_mtime >= older_than:
                    os.unlink(path)
                    removed.append(path)
    return removed


def pack(git: GitRepo) -> int:
    """Pack the loose objects (hold the store lock); the number of packs afterwards."""
    import subprocess

    clear_killed_repack(git.git_dir)
    exe = gitcli.which()
    if exe is not None:
        done = subprocess.run(
            [exe, "-C", git.root, "-c", "gc.auto=0", "repack",
             f"--geometric={GEOMETRIC_FACTOR}", "-d", "-q"],
            capture_output=True, stdin=subprocess.DEVNULL, env=gitcli.env())
        if done.returncode == 0:
            git.close()  # dulwich must see the new pack list
            return pack_count(git.git_dir)
    store = git.repo.object_store
    store.pack_loose_objects()
    if pack_count(git.git_dir) >= DULWICH_MAX_PACKS:
        store.repack()
    modes.private_packs(git.git_dir)  # dulwich writes its packs 0444
    git.close()
    return pack_count(git.git_dir)
