"""The modes of files a library writes with fixed ones, whatever the umask.

dulwich makes every pack and pack index it writes (a fetch, its own repack) 0444; filemem's
objects are the owner's alone, 0400 like the packs and loose objects filemem writes itself.
(Folders and other files dulwich makes follow the umask: filemem calls it under
``private_files()``.) This module depends on nothing else in filemem.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection
from typing import Final

PACK_MODE: Final = 0o400


def pack_names(git_dir: str) -> set[str]:
    """The names in ``git_dir``'s ``objects/pack`` (none if it does not exist)."""
    try:
        return set(os.listdir(os.path.join(git_dir, "objects", "pack")))
    except (FileNotFoundError, NotADirectoryError):
        return set()


def private_packs(git_dir: str, keep: Collection[str] = ()) -> None:
    """Make every pack and index in ``git_dir``'s ``objects/pack`` 0400 (those dulwich
    wrote 0444), except the names in ``keep`` (what was there before, in a repository
    that is not filemem's own). A file someone else owns is left as it is."""
    if os.name == "nt":
        return  # no group/other bits there
    folder = os.path.join(git_dir, "objects", "pack")
    for name in pack_names(git_dir) - set(keep):
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                os.chmod(path, PACK_MODE)
