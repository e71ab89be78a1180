"""Which hand edits a command's PATH arguments name (`filemem adopt`, `discard`, `diff`):
a file, a folder (what is under it), absolute or relative to the store or to the current
folder; and, when they name nothing to do, the error that says why and what mends it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from filemem import errors, location
from filemem.files.layout import is_editor_file

if TYPE_CHECKING:
    from filemem.owner.handedits import Change


def select(changes: list[Change], root: str, paths: Iterable[str] | None,
           unchanged: Iterable[Change] = (), as_is: bool = False) -> list[Change]:
    """The changes named by ``paths`` (absolute, store-relative or relative to the current
    folder; a folder selects what is under it); all of them when ``paths`` is None. When
    they name none, the error says whether they name files that are invalid at HEAD but
    ``unchanged`` (from :func:`invalid`), and what mends those. ``as_is`` (adopting): a file
    ``paths`` name exactly that is invalid at HEAD, unchanged and adoptable as it is, is
    picked too."""
    if paths is None:
        return changes
    paths = list(paths)
    given = {os.path.relpath(full, root).replace(os.sep, "/") for p in paths
             for full in (os.path.abspath(p), os.path.join(root, p))}
    if as_is:
        changes = changes + [c for c in unchanged if c.path in given and c.after is not None
                             and c.problem is None]

    def under(rel: str) -> list[Change]:
        return [c for c in changes
                if rel == "" or c.path == rel or c.path.startswith(rel.rstrip("/") + "/")]

    picked: list[Change] = []
    for p in paths:
        readings = [os.path.abspath(p)]  # relative to the current folder (or absolute)
        if not os.path.isabs(p):
            readings.append(os.path.join(root, p))  # relative to the store
        found = None
        for full in readings:
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == ".." or rel.startswith("../"):
                continue
            hits = under("" if rel == "." else rel)
            if hits:
                found = hits
                break
        if found is None and all(os.path.relpath(r, root).startswith("..") for r in readings):
            raise errors.invalid_input(f"{p} is not inside the store {root}")
        if found is None and is_editor_file(p.replace(os.sep, "/")):
            raise errors.invalid_input(
                f"{p} is an editor's swap, backup or temporary file, not an entry: filemem "
                "leaves it alone; delete it yourself once no editor has the file open")
        picked += [c for c in found or () if c not in picked]
    if not picked:
        for c in unchanged:
            if c.path in given and c.at_head is not None:
                details = c.at_head.details
                full = str(details["path"])
                way, hint = str(details.get("wayOut")), errors.adopt_hint(root, full)
                adopt = f"`{location.command(root, 'adopt', full)}`"
                if hint in way and c.after is not None and c.problem is None:
                    way = (f"{adopt} takes it as it is (it gets an id and front-matter); "
                           f"or, with git: {way.replace(hint, '')}")
                elif hint in way:  # adopt takes a fix once made: not the file as it is
                    way = (f"fix the file in your editor, then {adopt} commits the fix as "
                           f"your edit; or, with git: {way.replace(hint, '')}")
                raise errors.invalid_input(
                    f"nothing to do for {c.path}: it is as it was committed, and that is "
                    f"invalid ({details.get('reason')}); mend it first: {way}")
        raise errors.invalid_input(
            f"nothing to do for {', '.join(paths)}: no uncommitted change there "
            "(see `filemem status`)")
    return picked
