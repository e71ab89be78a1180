"""Which files git ignores (``.gitignore`` files, ``.git/info/exclude``, the global
excludes file), by dulwich's matching, with one difference: a ``.gitignore`` that is a
FIFO, socket or device is never opened. Opening a FIFO waits for a writer for ever (git's
own ``git status`` hangs on one); here its folder simply has no patterns, and the file
itself is listed like any other file filemem never opens (:func:`filemem.files.atomic.special`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from dulwich.ignore import IgnoreFilter, IgnoreFilterManager
from dulwich.repo import Repo

from filemem.files import atomic


class _Ignores(IgnoreFilterManager):
    def _load_path(self, path: str) -> IgnoreFilter | None:
        try:
            mode = os.lstat(os.path.join(self._top_path, path, ".gitignore")).st_mode
        except OSError:
            mode = 0
        if atomic.special(mode):
            self._path_filters[path] = None
            return None
        return super()._load_path(path)


def not_ignored(repo: Repo, paths: Iterable[str]) -> set[str]:
    """The ``paths`` (relative, ``/``-separated) that git does not ignore."""
    ignores = _Ignores.from_repo(repo)
    return {path for path in paths if not ignores.is_ignored(path)}
