"""``.filemem/cache/log-index``: which entries each commit's audit rows name, so that
``filemem log --entry ID`` reads only the commits about that entry, not the whole history.

One line a commit: ``<sha> <commit time> <parents, comma-separated or -> <entry ids or ->``.
The ids of a filemem commit are those its audit rows name; those of a commit made outside
filemem (a ``git commit`` of a hand edit, a ``git pull`` merge), which has no rows, are the
entries whose files it changed (:func:`changed_entries`).
It is a memo of git, extended on each use with the commits HEAD has that it lacks (a walk
from HEAD that stops at the commits it knows, so a merge costs only its new commits) and
rebuilt from git when it is missing or does not parse. The commits it picks are read from
git, rows and all: what ``log --entry`` shows is always git's. Like every cache in
``.filemem/``, whoever can write it could make that listing skip a commit; ``filemem log``
(without ``--entry``) and ``filemem verify`` never use it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from filemem.files import atomic, gitrepo
from filemem.files.gitrepo import CommitInfo
from filemem.files.layout import id_from_path
from filemem.store.core import Store
from filemem.types import AuditRow

HEADER: Final = b"filemem-log-index 2\n"  # 2: commits made outside filemem name entries
NAME: Final = "log-index"
ANY: Final = "*"  # in place of the ids: the commit is read whatever entry is asked for
_SAFE: Final = re.compile(r"^[A-Za-z0-9._-]+$")

# sha -> its line's other fields as written (time, parents, ids): a long history's 100,000
# lines are split in one go and each field is read when it is needed (:func:`time_and_parents`,
# :func:`about`), which took loading the index from a third of `log --entry` to a tenth
Known = dict[str, tuple[str, str, str]]


def _path(store: Store) -> str:
    return os.path.join(store.meta, "cache", NAME)


def _load(path: str) -> Known:
    try:
        data = atomic.read_nofollow(path)
    except OSError:
        return {}
    if not data.startswith(HEADER) or not data.endswith(b"\n") or data == HEADER:
        return {}  # another format, or a torn last line: rebuild from git
    try:
        body = data[len(HEADER):-1].decode("ascii")
    except UnicodeDecodeError:
        return {}
    fields = body.replace("\n", " ").split(" ")
    shas, whens = fields[0::4], fields[1::4]
    # four fields a line, a full sha first and a time second, or it was torn or edited:
    # rebuild from git (a line of 3 fields beside one of 5 would shift every field after it)
    if len(fields) != 4 * (body.count("\n") + 1) or set(map(len, shas)) != {40} \
            or not all(map(str.isdigit, whens)):
        return {}
    return dict(zip(shas, zip(whens, fields[2::4], fields[3::4], strict=True), strict=True))


def _line(time: int, parents: tuple[str, ...], ids: tuple[str, ...]) -> tuple[str, str, str]:
    return str(time), ",".join(parents) or "-", ",".join(ids) or "-"


def _split(field: str) -> tuple[str, ...]:
    # most commits have one parent and name one entry: no split for those
    return () if field == "-" else tuple(field.split(",")) if "," in field else (field,)


def time_and_parents(known: Known, sha: str) -> tuple[int, tuple[str, ...]]:
    """A commit's time and parents as the index has them (KeyError if it lacks the commit)."""
    when, parents, _ids = known[sha]
    return int(when), _split(parents)


def about(known: Known, prefix: str) -> set[str]:
    """The commits whose rows name an entry whose id starts with ``prefix``, and those whose
    ids the index could not hold (:data:`ANY`): read whatever entry is asked for."""
    return {sha for sha, (_when, _parents, ids) in known.items()
            if (prefix in ids or ANY in ids)
            and any(i.startswith(prefix) or i == ANY for i in _split(ids))}


def external(rows: Sequence[AuditRow]) -> bool:
    """Are these a commit's rows as :meth:`AuditTrail.commit_rows` gives them for a commit
    made outside filemem (one row of its own, naming no entry)?"""
    return len(rows) == 1 and rows[0].get("action") == "external-commit" \
        and not rows[0].get("entryId")


def changed_entries(store: Store, info: CommitInfo,
                    changes: list[tuple[str, str | None, str | None]] | None = None
                    ) -> dict[str, tuple[str, str | None]]:
    """The entries whose files ``info`` changed: id -> (path, blob it left, None if it
    deleted the file). ``changes``: its files against its first parent, if known. A merge
    changed a file only where it differs from every parent (one that took one side's file
    as it was changed nothing of its own, as ``git log -- PATH`` sees it)."""
    found: dict[str, tuple[str, str | None]] | None = None
    for n, parent in enumerate(info.parents or (None,)):
        if n == 0 and changes is not None:
            diff: Iterable[tuple[str, str | None, str | None]] = changes
        else:
            diff = store.git.diff(None if parent is None else store.git.commit(parent).tree,
                                  info.tree)
        here: dict[str, tuple[str, str | None]] = {}
        for path, _old, new in diff:
            eid = id_from_path(path)
            if eid is not None and (new is not None or eid not in here):
                here[eid] = (path, new)  # a file moved: the path it has now
        found = here if found is None else {k: v for k, v in here.items() if k in found}
    return found or {}


def forget(store: Store) -> None:
    """Drop the index (one that lacks a commit's parent: it is rebuilt from git)."""
    with contextlib.suppress(OSError):
        os.unlink(_path(store))


def commits_by_entry(store: Store) -> Known:
    """Every commit reachable from HEAD (and others seen before): its time, parents and
    the entry ids its audit rows name; the index file extended with what was missing."""
    path = _path(store)
    known = _load(path)
    head = store.git.head()
    new: list[str] = []
    stack = [head] if head is not None and head not in known else []
    while stack:
        sha = stack.pop()
        if sha in known:
            continue
        info = store.git.commit(sha)
        rows = store.trail.commit_rows(info)
        ids = sorted(changed_entries(store, info) if external(rows) else
                     {str(r.get("entryId")) for r in rows if r.get("entryId")})
        if not all(_SAFE.match(i) for i in ids):
            ids = [ANY]  # an id this file cannot hold (hand-made trailers): always read it
        known[sha] = _line(info.time, info.parents, tuple(ids))
        new.append(sha)
        stack.extend(p for p in info.parents if p not in known)
    if new:
        lines = [f"{s} {' '.join(known[s])}\n" for s in new]
        body = "".join(lines).encode("ascii", "replace")
        with contextlib.suppress(OSError):  # a read-only store: just not remembered
            if os.path.exists(path) and len(known) > len(new):
                with open(path, "ab") as f:  # appended: a torn tail fails to parse, rebuilt
                    f.write(body)
            else:
                atomic.atomic_write(path, HEADER + body, durable=False)
    return known


def newest_first(known: Known, head: str) -> Iterator[str]:
    """The commits reachable from ``head`` in the order of
    :meth:`filemem.files.gitrepo.GitRepo.newest_first`, walked on the index (KeyError if
    it lacks one of them)."""
    return gitrepo.newest_first(head, lambda sha: int(known[sha][0]),
                                lambda sha: _split(known[sha][1]))
